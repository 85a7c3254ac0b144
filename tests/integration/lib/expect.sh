# Expectations of the end-to-end tests: an exit code, a line or a text in a command's output.

fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_exit CODE LOG command...: runs the command with stdout and stderr in LOG and checks its
# exit code.
expect_exit() {
  local code=$1 log=$2 status=0
  shift 2
  "$@" > "$log" 2>&1 || status=$?
  [[ $status -eq $code ]] || { cat "$log"; fail "$* exited $status, expected $code"; }
}
# expect_line LOG LINE: LOG has LINE, whole; expect_text LOG TEXT: LOG contains TEXT;
# expect_match LOG PATTERN: a line of LOG matches PATTERN (grep's basic regular expression).
expect_line() { grep -qxF -- "$2" "$1" || { cat "$1"; fail "no line '$2' in $1"; }; }
expect_text() { grep -qF -- "$2" "$1" || { cat "$1"; fail "no '$2' in $1"; }; }
expect_match() { grep -q -- "$2" "$1" || { cat "$1"; fail "no line matching '$2' in $1"; }; }
# expect_refusal CODE LOG TEXT command...: the command exits CODE and its output (in LOG) contains
# TEXT. A refusal checked as `[[ $status == 2 ]] && grep ...` cannot fail under set -e: a false
# test before && does not stop the script.
expect_refusal() {
  local code=$1 log=$2 text=$3
  shift 3
  expect_exit "$code" "$log" "$@"
  expect_text "$log" "$text"
}

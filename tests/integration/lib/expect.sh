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
# expect_line LOG LINE: LOG has LINE, whole; expect_text LOG TEXT: LOG contains TEXT.
expect_line() { grep -qxF -- "$2" "$1" || { cat "$1"; fail "no line '$2' in $1"; }; }
expect_text() { grep -qF -- "$2" "$1" || { cat "$1"; fail "no '$2' in $1"; }; }

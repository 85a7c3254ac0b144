#!/usr/bin/env bash
# The suite's warm Python (tests/python/server.py, through build/test-python) runs a script as the
# interpreter would: the same stdout, stderr, exit status, stdin, working directory, environment,
# argv, __file__ and sys.path[0], for a file, `-` and `-c`; a variable read at import (OMP_NUM_THREADS)
# that differs from the server's sends the call to the real interpreter; a caller killed takes its
# script with it; with the server gone, each call runs the real interpreter.
set -euo pipefail
xtrain=$1
srcdir=$2
test_python=$(dirname "$(readlink -f "$xtrain")")/test-python
real_python=${srcdir}/.venv/bin/python3
work=$(mktemp -d)
server=
trap '[[ -z $server ]] || kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$work/scripts" "$work/cwd"
cat > "$work/scripts/helper.py" <<'PY'
VALUE = "helper imported from the script's folder"
PY
cat > "$work/scripts/probe.py" <<'PY'
import os, sys, warnings
import torch
from helper import VALUE
print("argv", sys.argv, "name", __name__, "file", __file__)
print("cwd", os.getcwd(), "path0", sys.path[0], VALUE)
print("env", os.environ.get("PROBE_VALUE"), "stdin", sys.stdin.read().strip())
print("torch", torch.ones(4).sum().item())
warnings.warn("a warning")
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]))
PY

# run NAME PYTHON [args...]: stdout, stderr and status of a probe call, from $work/cwd.
run() {
  local name=$1 python=$2 status=0
  shift 2
  (cd "$work/cwd" && echo "from stdin" | PROBE_VALUE=seen "$python" "$@" > "$work/$name.out" 2> "$work/$name.err") || status=$?
  echo "$status" > "$work/$name.status"
}
# same A B: two calls' outputs and status agree.
same() {
  for part in out err status; do
    cmp -s "$work/$1.$part" "$work/$2.$part" || { diff "$work/$1.$part" "$work/$2.$part"; fail "$1 and $2 differ in $part"; }
  done
}

XTRAIN_PYTHON_SERVER= run file_direct "$test_python" "$work/scripts/probe.py" 3 x
XTRAIN_PYTHON_SERVER= run code_direct "$test_python" -W ignore -c 'import sys; print(sys.argv); raise ValueError("boom")' a
[[ $(cat "$work/file_direct.status") == 3 ]] || fail "the probe's direct status is $(cat "$work/file_direct.status")"

"$real_python" "$srcdir/tests/python/server.py" "$work/socket" > "$work/server.log" 2>&1 &
server=$!
for _ in $(seq 900); do [[ -S $work/socket ]] && break; sleep 0.1; done
[[ -S $work/socket ]] || { cat "$work/server.log"; fail "the server did not start"; }
export XTRAIN_PYTHON_SERVER=$work/socket

run file_served "$test_python" "$work/scripts/probe.py" 3 x
same file_direct file_served
# A script through stdin.
stdin_probe='import os, sys; print(sys.argv, __name__, repr(sys.path[0]), os.getcwd(), "__file__" in globals())'
(cd "$work/cwd" && "$test_python" - 0 <<< "$stdin_probe" > "$work/stdin_served.out" 2>&1) || true
(cd "$work/cwd" && XTRAIN_PYTHON_SERVER= "$test_python" - 0 <<< "$stdin_probe" > "$work/stdin_direct.out" 2>&1) || true
cmp -s "$work/stdin_direct.out" "$work/stdin_served.out" || { diff "$work/stdin_direct.out" "$work/stdin_served.out"; fail "stdin scripts differ"; }
run code_served "$test_python" -W ignore -c 'import sys; print(sys.argv); raise ValueError("boom")' a
same code_direct code_served
grep -q "^ValueError: boom$" "$work/code_served.err" || fail "no traceback: $(cat "$work/code_served.err")"
[[ $(cat "$work/code_served.status") == 1 ]] || fail "an exception's status is $(cat "$work/code_served.status")"

# Served, the probe starts without importing torch; declined (OMP_NUM_THREADS), it imports it.
start=$(date +%s%N)
run file_served_again "$test_python" "$work/scripts/probe.py" 0
served_ms=$((($(date +%s%N) - start) / 1000000))
start=$(date +%s%N)
OMP_NUM_THREADS=1 run file_declined "$test_python" "$work/scripts/probe.py" 0
declined_ms=$((($(date +%s%N) - start) / 1000000))
grep -q "^torch 4.0$" "$work/file_declined.out" || fail "declined call: $(cat "$work/file_declined.out" "$work/file_declined.err")"
echo "python server: a probe importing torch took $served_ms ms served, $declined_ms ms run directly"

# A caller killed (a test's timeout) takes its script with it.
timeout 2 "$test_python" -c 'import time; time.sleep(60)' && fail "the sleeper was not stopped" || true
sleep 0.5
children=$(pgrep -P "$server" || true)
[[ -z $children ]] || fail "the server still runs $children after its caller was killed"

# The server gone, each call runs the interpreter itself.
kill "$server"
wait "$server" 2>/dev/null || true
server=
[[ ! -e $work/socket ]] || fail "the server left its socket"
run file_after "$test_python" "$work/scripts/probe.py" 3 x
same file_direct file_after
echo "python server: ok"

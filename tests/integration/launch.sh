#!/usr/bin/env bash
# xtrain launch end to end, with bash scripts as ranks (--program bash): torchrun's
# environment, prefixed output, failure reports (exit code, signal, the rank's error file),
# stopping the other ranks (SIGTERM, then SIGKILL), restarts, signal forwarding, and two nodes
# on this machine.
set -euo pipefail
python=${XTRAIN_PYTHON:-$(dirname "$0")/../../.venv/bin/python3}
xtrain=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export TMPDIR=$work  # where the launcher keeps the error files of failed jobs

fail() {
  echo "FAIL: $*"
  for file in out err; do [[ -f $file ]] && { echo "--- $file"; cat "$file"; }; done
  exit 1
}

# run EXPECTED_STATUS ARGS...: runs `xtrain launch ARGS...` into out/err and checks its exit code.
run() {
  local expected=$1 status=0
  shift
  "$xtrain" launch "$@" >out 2>err || status=$?
  [[ $status -eq $expected ]] || fail "launch $*: exit $status, expected $expected"
}

expect_line() { grep -qxF -- "$2" "$1" || fail "no line '$2' in $1"; }
expect_text() { grep -qF -- "$2" "$1" || fail "no '$2' in $1"; }

# A pair of free TCP ports P, P+1 (the ranks' store and the launchers' store).
free_port_pair() {
  "$python" - <<'PY'
import socket
for _ in range(100):
    a, b = socket.socket(), socket.socket()
    try:
        a.bind(("", 0)); port = a.getsockname()[1]; b.bind(("", port + 1))
        print(port); break
    except OSError:
        pass
    finally:
        a.close(); b.close()
PY
}

# --- every rank runs with torchrun's environment; its output comes back line by line, prefixed.
env -u OMP_NUM_THREADS "$xtrain" launch --nproc-per-node 3 --program bash -- -c '
  echo "env $RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $GROUP_RANK $TORCHELASTIC_RESTART_COUNT $OMP_NUM_THREADS"
  echo "port $MASTER_ADDR:$MASTER_PORT $TORCHELASTIC_RUN_ID"
  echo "to stderr $RANK" >&2
  printf "no newline at the end"' >out 2>err || fail "three ranks: exit $?"
for rank in 0 1 2; do
  expect_line out "[rank $rank]: env $rank $rank 3 3 0 0 1"
  expect_line err "[rank $rank]: to stderr $rank"
  expect_line out "[rank $rank]: no newline at the end"
done
[[ $(wc -l <out) -eq 9 ]] || fail "expected 9 lines of output"
[[ $(grep '^\[rank .\]: port' out | sort -u -k3 | wc -l) -eq 1 ]] || fail "ranks disagree on MASTER_PORT or run id"
grep -qE '^\[rank 0\]: port 127\.0\.0\.1:[0-9]+ [0-9a-f]{16}$' out || fail "MASTER_ADDR/PORT or run id"
expect_text err "OMP_NUM_THREADS=1 for each rank"
OMP_NUM_THREADS=4 "$xtrain" launch --nproc-per-node 2 --program bash -- -c 'echo "omp $OMP_NUM_THREADS"' >out 2>err
expect_line out "[rank 1]: omp 4"

# --- a failing rank: the launcher stops the others (rank 0 would sleep 10 minutes), exits 1,
# and names the rank and its exit code.
start=$SECONDS
run 1 --nproc-per-node 2 --program bash -- -c 'if [[ $RANK == 1 ]]; then echo failing; exit 3; fi; sleep 600'
((SECONDS - start < 20)) || fail "the sleeping rank was not stopped"
expect_line out "[rank 1]: failing"
expect_text err "bash -c"
expect_text err "FAILED"
expect_line err "  rank      : 1 (local_rank: 1)"
expect_text err "  exitcode  : 3 (pid: "
expect_line err "  error_file: <N/A>"
! compgen -G "$work/xtrain-launch-*" > /dev/null || fail "a failed launch left its temporary folder: $(ls -d "$work"/xtrain-launch-*)"

# --- ranks that fail while the others are still starting: the SIGTERM sent to a rank that has
# not yet dropped the launcher's signal handlers must not count as a signal to the launcher
# (that exited 143, "stopped by SIGTERM", in about half of such launches).
for attempt in $(seq 1 20); do
  run 1 --nproc-per-node 4 --program bash -- -c 'exit 3'
  expect_text err "  exitcode  : 3 (pid: "
done

# --- a surviving rank that ignores SIGTERM is killed 3 s after the failure.
start=$SECONDS
run 1 --nproc-per-node 2 --program bash -- -c '
  if [[ $RANK == 1 ]]; then sleep 1; exit 3; fi
  trap "" TERM; while true; do sleep 0.2; done'
((SECONDS - start >= 3 && SECONDS - start < 15)) || fail "SIGKILL after the grace period: took $((SECONDS - start)) s"
expect_line err "  rank      : 1 (local_rank: 1)"

# --- a rank killed by SIGKILL is reported with the signal's name.
run 1 --nproc-per-node 2 --program bash -- -c 'if [[ $RANK == 1 ]]; then kill -9 $$; fi; sleep 600'
expect_line err "  rank      : 1 (local_rank: 1)"
expect_text err "  exitcode  : -9 (pid: "
expect_line err "  signal    : SIGKILL"

# --- restarts: the script fails on the first attempt only, so the second one succeeds;
# --log-dir keeps each attempt's raw output.
run 0 --nproc-per-node 2 --max-restarts 1 --log-dir logs --program bash -- -c '
  if [[ $TORCHELASTIC_RESTART_COUNT == 0 && $RANK == 1 ]]; then exit 5; fi
  echo "attempt $TORCHELASTIC_RESTART_COUNT of rank $RANK, max $TORCHELASTIC_MAX_RESTARTS"'
expect_line out "[rank 0]: attempt 1 of rank 0, max 1"
expect_line out "[rank 1]: attempt 1 of rank 1, max 1"
expect_text err "attempt 0 failed: rank 1 (local_rank 1 on"
expect_text err "exited with code 5; restarting every rank (restart 1 of 1)"
expect_line logs/attempt_1/rank_1.log "attempt 1 of rank 1, max 1"
[[ -f logs/attempt_0/rank_0.log && ! -s logs/attempt_0/rank_1.log ]] || fail "attempt 0 logs"
# ... and with no restart left the job fails after the last attempt.
run 1 --nproc-per-node 1 --max-restarts 2 --program bash -- -c 'echo "try $TORCHELASTIC_RESTART_COUNT"; exit 7'
[[ $(grep -c '^\[rank 0\]: try ' out) -eq 3 ]] || fail "expected 3 attempts"
expect_text err "  exitcode  : 7 (pid: "

# --- `xtrain train` with a missing recipe writes torchelastic's error file; its message is in
# the launcher's report, and the job exits 2 as the ranks did, without restarting (bad input
# fails the same way on every attempt).
run 2 --nproc-per-node 2 --max-restarts 3 --log-dir "$work/bad-input-logs" -- train "$work/no-such-recipe.yaml"
if grep -q "restarting every rank" err; then fail "bad input was restarted"; fi
expect_text err "xtrain train $work/no-such-recipe.yaml FAILED"
expect_text err "  exitcode  : 2 (pid: "
expect_text err "  error_file: /"
grep -qE "^  message   : .*Error: .*no-such-recipe\.yaml" err || fail "the rank's error message is not in the report"
error_file=$(sed -n 's/^  error_file: //p' err | head -n 1)
"$python" - "$error_file" <<'PY' || fail "$error_file is not torchelastic's layout"
import json, sys
message = json.load(open(sys.argv[1]))["message"]
assert "no-such-recipe.yaml" in message["message"], message
assert int(message["extraInfo"]["timestamp"]) > 0 and message["extraInfo"]["py_callstack"]
PY

# --- SIGTERM to the launcher reaches every rank once; the launcher exits 128 + 15.
"$xtrain" launch --nproc-per-node 2 --program bash -- -c '
  trap "echo stopping on TERM; exit 0" TERM
  echo ready; sleep 600 & wait' >out 2>err &
launcher=$!
for _ in $(seq 100); do [[ $(grep -c ready out) -eq 2 ]] && break; sleep 0.1; done
kill -TERM $launcher
status=0
wait $launcher || status=$?
[[ $status -eq 143 ]] || fail "after SIGTERM: exit $status, expected 143"
expect_line out "[rank 0]: stopping on TERM"
expect_line out "[rank 1]: stopping on TERM"
expect_text err "received SIGTERM"

# --- bad arguments are exit 2 with a message naming the fix.
run 2 --nproc-per-node 0 --program bash -- -c true
expect_text err "--nproc-per-node must be at least 1, got 0"
run 2 --nproc-per-node 1 --nnodes 2 --node-rank 2 --program bash -- -c true
expect_text err "--node-rank 2 is outside 0..1"
run 2 --nproc-per-node 1 --program bash
expect_text err "missing the command after \`--\`"
run 2 --nproc-per-node 1 --program no-such-program-xyz -- x
expect_text err "--program no-such-program-xyz: not found on PATH"

# --- two nodes on this machine: node 1 starts first and waits for node 0's store.
port=$(free_port_pair)
two_nodes() {  # two_nodes EXPECTED_STATUS LAUNCH_ARGS... -- RANK_ARGS...: node i writes node_i.out/err
  local expected=$1 status0=0 status1=0
  shift
  "$xtrain" launch --nnodes 2 --node-rank 1 --master-port "$port" "$@" >node_1.out 2>node_1.err &
  local node1=$!
  sleep 0.5  # node 1 is then already waiting for node 0's store and settings
  "$xtrain" launch --nnodes 2 --node-rank 0 --master-port "$port" "$@" >node_0.out 2>node_0.err || status0=$?
  wait $node1 || status1=$?
  if [[ $status0 -ne $expected || $status1 -ne $expected ]]; then
    tail -n 30 node_0.err node_1.err
    fail "two nodes: exits $status0 and $status1, expected $expected"
  fi
}
two_nodes 0 --nproc-per-node 1 --program bash -- -c 'echo $RANK $WORLD_SIZE $GROUP_RANK'
expect_line node_0.out "[rank 0]: 0 2 0"
expect_line node_1.out "[rank 1]: 1 2 1"

# A failure on node 1 stops node 0's sleeping rank, and both report node 1's rank.
start=$SECONDS
two_nodes 1 --nproc-per-node 2 --program bash -- -c 'if [[ $RANK == 3 ]]; then exit 4; fi; sleep 600'
((SECONDS - start < 30)) || fail "node 0's ranks were not stopped"
for node in 0 1; do
  expect_line node_$node.err "  rank      : 3 (local_rank: 1)"
  expect_text node_$node.err "  exitcode  : 4 (pid: "
done

# The nodes restart together: node 1's rank fails in attempt 0, every rank runs attempt 1.
two_nodes 0 --nproc-per-node 1 --max-restarts 1 --program bash -- -c '
  if [[ $TORCHELASTIC_RESTART_COUNT == 0 && $RANK == 1 ]]; then exit 6; fi
  if [[ $TORCHELASTIC_RESTART_COUNT == 0 ]]; then sleep 600; fi
  echo "done in attempt $TORCHELASTIC_RESTART_COUNT"'
expect_line node_0.out "[rank 0]: done in attempt 1"
expect_line node_1.out "[rank 1]: done in attempt 1"
expect_text node_0.err "attempt 0 failed: rank 1"

# Nodes launched with different settings stop at once instead of hanging at a restart.
two_nodes_mismatch() {
  local status0=0 status1=0
  "$xtrain" launch --nnodes 2 --node-rank 1 --master-port "$port" --nproc-per-node 1 --max-restarts 2 \
    --program bash -- -c true >node_1.out 2>node_1.err &
  local node1=$!
  sleep 0.5
  "$xtrain" launch --nnodes 2 --node-rank 0 --master-port "$port" --nproc-per-node 1 \
    --program bash -- -c true >node_0.out 2>node_0.err || status0=$?
  wait $node1 || status1=$?
  [[ $status0 -eq 1 && $status1 -eq 2 ]] || fail "mismatched nodes: exits $status0 and $status1"
}
two_nodes_mismatch
expect_text node_1.err "every node needs the same --nnodes, --nproc-per-node, --max-restarts and --run-id"
expect_text node_0.err "stopped: launch: node 1 has settings"

echo "launch: all checks passed"

#!/usr/bin/env bash
# Elastic recovery under PyTorch's own launcher: `torchrun --nnodes 1:2 --rdzv-backend c10d
# --no-python xtrain train ...` on two network namespaces (192.0.2.1-2, TEST-NET-1, no route
# anywhere else) joined by veth pairs to a bridge in a third, one rank a node. Every process of
# node 1 (its torchrun agent and rank) is killed with SIGKILL after step 12; node 0's rank fails
# on its dead peer, node 0's agent restarts its group with the one node left, and xtrain resumes
# from its checkpoint with the global batch kept by twice the accumulation: all 24 steps, losses
# within 1e-5 relative of an uninterrupted 2-rank run. Prints the time from the kill to the next
# new step. Checkpoints are also kept in the nodes' memory (checkpoint.in_memory, a folder per
# node under /dev/shm, node 1's removed with it): node 0 held its own files and node 1's copy, so
# the restart reads them there, resharded to one rank. The rendezvous settings (--rdzv-conf) name a dead node after 2 s instead of 15 s and
# close a round 1 s after its last join instead of 30 s, and name node 0 the host of the
# rendezvous store (torchrun guesses it from the machine's hostname, which names neither
# namespace's address); everything else is torchrun's default.
# Needs root, iproute2's `ip` and torchrun (from the venv beside XTRAIN_PYTHON): without them it
# fails, it does not skip. KEEP=1 keeps its folder (the nodes' logs, the runs).
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
source "$srcdir/tests/integration/lib/expect.sh"
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
source "$srcdir/tests/integration/lib/bridged_nodes.sh"
# The venv's own torchrun (XTRAIN_PYTHON may be build/test-python, outside the venv).
torchrun=$("$python" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/torchrun
[[ -x $torchrun ]] || fail "no torchrun at $torchrun (pip install torch into the venv of XTRAIN_PYTHON)"
bridged_session "xt$$" 2

write_recipe "$work/recipe.yaml" 24
sed -i 's/log_every: 5/log_every: 1/; s/^checkpoint:$/checkpoint:\n  in_memory: true/' "$work/recipe.yaml"
train reference 2 --set checkpoint.in_memory=false

# start_torchrun NODE: the node's torchrun in its namespace, each output line stamped with the time
# it arrived ($EPOCHREALTIME), into $work/node$NODE.log (xtrain flushes each step's line).
start_torchrun() {
  local node=$1 host=false
  ((node == 0)) && host=true
  ip netns exec "${namespaces[node]}" env PYTHONUNBUFFERED=1 XTRAIN_NODE_MEMORY_DIR="$node_memory/node$node" "$torchrun" --nnodes 1:2 --nproc-per-node 1 \
    --rdzv-backend c10d --rdzv-endpoint 192.0.2.1:29700 --rdzv-id xtrain-elastic \
    --rdzv-conf keep_alive_interval=1,keep_alive_max_attempt=2,last_call_timeout=1,is_host=$host \
    --local-addr "192.0.2.$((node + 1))" --max-restarts 3 --monitor-interval 0.1 \
    --no-python "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/run" 2>&1 |
    while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done > "$work/node$node.log" &
  pids+=($!)
}

start_torchrun 0
start_torchrun 1
log0=$work/node0.log
wait_for "$log0" "step +12/24" 40
killed=$(kill_node 1)
rm -rf "$node_memory/node1"
wait "${pids[1]}" 2> /dev/null || true  # its end by SIGKILL is the point, not news
status=0
wait "${pids[0]}" || status=$?
grep -qE "step +24/24" "$log0" || { tail -n 40 "$log0"; fail "torchrun on node 0 did not finish the run without node 1 (exit $status)"; }
expect_match "$log0" "parallel: 2 ranks (torchrun)"
expect_match "$log0" "train: 24 steps x 8 sequences (4 per rank: 2 micro batches of 2)"
expect_match "$log0" "failed (exitcode: 1) local_rank: 0"
expect_match "$log0" "train: 24 steps x 8 sequences (8 per rank: 4 micro batches of 2)"
expect_match "$log0" "resumed from $node_memory/node0/step-[0-9]* at step [0-9]* (from host memory: 0 files (0.0 MiB) fetched"

same_losses "$work/reference" "$work/run" 24 1e-5 "torchrun shrink (the last steps on 1 node of 1 rank)"

last_step=$(awk -v k="$killed" '$1 < k && match($0, /step +[0-9]+\/24/) {
  s = substr($0, RSTART, RLENGTH); sub(/\/24/, "", s); gsub(/[^0-9]/, "", s); last = s + 0 } END { print last }' "$log0")
next_step=$(first_time "$log0" "step +$((last_step + 1))/24" "$killed")
detected=$(first_time "$log0" " error: " "$killed")
reloaded=$(first_time "$log0" "resumed from" "$killed")
resumed_at=$(grep -o 'resumed from .* at step [0-9]*' "$log0" | grep -o '[0-9]*$')
awk -v k="$killed" -v d="$detected" -v l="$reloaded" -v n="$next_step" -v last="$last_step" -v from="$resumed_at" 'BEGIN {
  printf "kill of node 1 after step %d to the next new step (%d) under torchrun: %.2f s\n", last, last + 1, n - k
  printf "  detection   %.2f s  (rank 0 failing on its dead peer)\n", d - k
  printf "  restart     %.2f s  (torchrun on node 0: a new rendezvous without node 1, xtrain started, step-%d checkpoint read)\n", l - d, from
  printf "  recomputed  %.2f s  (steps %d to %d again, then %d)\n", n - l, from + 1, last, last + 1 }'

#!/usr/bin/env bash
# Checkpoints in the nodes' host memory (checkpoint.in_memory): a restart reads them from the
# nodes left, not from run.dir. Each node's memory folder is a tmpfs folder of its own
# (/dev/shm/xtrain-test-<pid>/nodeN, XTRAIN_NODE_MEMORY_DIR).
#   one process: stopped at step 10, resumed from its own memory (nothing to fetch); the 24
#                steps equal an uninterrupted run's bit for bit; the folder is gone at the end.
#                With a 1 MiB tmpfs as the memory folder each copy is refused with a warning that
#                names the room and the fix, and the run resumes from disk.
#   spare:       three network-namespace nodes as in elastic_nodes.sh, node 2 a hot spare; node 1
#                is killed after step 12 and its memory folder removed (the node is gone, its
#                memory with it). The spare holds nothing: it receives every file of the
#                checkpoint (step-10, or step-15 when the kill lands late) from node 0, which
#                kept node 1's copy; the ranks resume from memory, and the
#                losses equal the uninterrupted run's bit for bit.
#   damaged:     the same, with node 0's copy of node 1's shard flipped after the kill: the
#                manifest check finds it, and the ranks read the checkpoint from disk instead.
# Prints each resume's source and the seconds it took (metrics.jsonl: resume_read_s).
# Needs root and iproute2's `ip`: without them it fails, it does not skip.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
source "$srcdir/tests/integration/lib/expect.sh"
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
source "$srcdir/tests/integration/lib/bridged_nodes.sh"
bridged_session "xm$$" 3

write_recipe "$work/recipe.yaml" 24
sed -i 's/log_every: 5/log_every: 1/; s/^checkpoint:$/checkpoint:\n  in_memory: true/' "$work/recipe.yaml"
grep -q "in_memory: true" "$work/recipe.yaml" || fail "the recipe lacks checkpoint.in_memory"

# resume_line RUN_LOG: the run's "resumed from" line; resume_record RUN: source and seconds.
resume_record() {
  "$python" - "$work/$1/metrics.jsonl" <<'PY'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
resumes = [r for r in records if "resume_source" in r]
assert resumes, "no resume record"
print(" ".join(f"{r['resume_source']} {r['resume_read_s']:.3f}" for r in resumes))
PY
}

# --- one process: its own memory ----------------------------------------------------------------
train reference1 1 --set checkpoint.in_memory=false
XTRAIN_NODE_MEMORY_DIR=$node_memory/solo train solo 1 --stop-at-step 10
[[ -f $node_memory/solo/step-10/manifest.json ]] || fail "no step-10 in $node_memory/solo after the stop"
XTRAIN_NODE_MEMORY_DIR=$node_memory/solo train solo 1
expect_match "$work/solo.log" \
  "resumed from $node_memory/solo/step-10 at step 10 (from host memory: 0 files (0.0 MiB) fetched from other nodes"
same_losses "$work/reference1" "$work/solo" 24 0 "one process, resumed from its memory"
[[ ! -e $node_memory/solo ]] || fail "the finished run left $node_memory/solo behind"
echo "one process: resume $(resume_record solo) s"

# A memory folder too small for the copy (a 1 MiB tmpfs, mounted in a mount namespace of its own):
# each save warns, naming the room and the fix, and leaves no partial copy; the run resumes from disk.
mkdir -p "$work/small-memory"
unshare --mount bash -c 'mount -t tmpfs -o size=1m tmpfs "$1" && shift &&
  XTRAIN_NODE_MEMORY_DIR=$1 "$2" train "$3" --set run.dir="$4" --stop-at-step 10 > "$4.first.log" 2>&1 &&
  ls -A "$1" > "$4.left" && XTRAIN_NODE_MEMORY_DIR=$1 "$2" train "$3" --set run.dir="$4" > "$4.log" 2>&1' \
  _ "$work/small-memory" "$work/small-memory" "$xtrain" "$work/recipe.yaml" "$work/small" ||
  { cat "$work/small.first.log" "$work/small.log"; fail "the run with a 1 MiB memory folder failed"; }
expect_match "$work/small.first.log" \
  "warning: step-10 was not copied to host memory ($work/small-memory/step-10): $work/small-memory has 1.0 MiB free, and this rank's files need about 1.5 MiB: give the tmpfs more room"
[[ ! -s $work/small.left ]] || fail "the failed copies left $(cat "$work/small.left") in the memory folder"
expect_match "$work/small.log" "resumed from $work/small/checkpoints/step-10 at step 10 (verified"
same_losses "$work/reference1" "$work/small" 24 0 "one process, memory folder too small: resumed from disk"

# --- a spare takes a lost node's place, its files from the others' memory ----------------------
train reference 2 --set checkpoint.in_memory=false

# spare_run RUN PORT: nodes 0 and 1 train, node 2 waits; node 1 is killed after step 12 and its
# memory folder removed; then DAMAGE runs (a command, or true) before the spare starts its rank.
spare_run() {
  local run=$1 damage=$3
  port=$2
  start_with_spare "$run"
  wait_for "$work/$run.node0.log" "\[rank 0\]: step +12/" 40
  kill_node 1 > /dev/null
  rm -rf "$node_memory/node1"
  # The checkpoint to resume from: step-10, or step-15 when the kill came late.
  kept=$(readlink "$work/$run/checkpoints/latest")
  [[ -f $node_memory/node0/$kept/shard-00001.safetensors ]] || { ls -R "$node_memory"; fail "node 0 holds no copy of node 1's $kept shard"; }
  $damage
  wait_all || { tail -n 30 "$work/$run".node*.log; fail "the job did not survive the loss of node 1"; }
  expect_match "$work/$run.node0.log" "attempt 1 runs on nodes 0,2 (2 ranks)"
}

spare_run spare 29800 true
expect_match "$work/spare.node0.log" "resumed from $node_memory/node0/$kept at step ${kept#step-} (from host memory: [1-9][0-9]* files"
files=$(grep -o 'from host memory: [0-9]* files' "$work/spare.node0.log" | grep -o '[0-9]*')
expected=$(ls "$work/spare/checkpoints/$kept" | wc -l)
[[ $files == "$expected" ]] || fail "the spare fetched $files files; $kept has $expected"
same_losses "$work/reference" "$work/spare" 24 0 "spare, resumed from the nodes' memory"
[[ ! -e $node_memory/node0 && ! -e $node_memory/node2 ]] || fail "the finished run left memory folders behind"
echo "spare: the spare received all $files files of $kept from node 0; resume $(resume_record spare) s"

# --- a damaged copy: the checkpoint comes from disk ---------------------------------------------
flip_copy() {
  "$python" - "$node_memory/node0/$kept/shard-00001.safetensors" <<'PY'
import sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
data[-5] ^= 0x40
open(path, "wb").write(data)
PY
}
spare_run damaged 29900 flip_copy
expect_match "$work/damaged.node0.log" "the copy of $kept in this node's host memory ($node_memory/node0/$kept) cannot be used: "
expect_match "$work/damaged.node0.log" "shard-00001.safetensors"
expect_match "$work/damaged.node0.log" "resumed from $work/damaged/checkpoints/$kept at step ${kept#step-} (verified"
same_losses "$work/reference" "$work/damaged" 24 0 "damaged copy, resumed from disk"
echo "damaged: resume $(resume_record damaged) s"

#!/usr/bin/env bash
# Failures of a rank: (1) rank 1 killed by SIGKILL at step 8 under --max-restarts 1: the job
# restarts, resumes from the step-5 checkpoint and ends with weights bit-identical to an
# uninterrupted run; (2) the same kill under --max-restarts 0 ends the job non-zero, naming rank
# 1 and SIGKILL, and rank 0 reports rank 1 as a dead peer (its heartbeat stopped); (3) rank 1 stalling at step 4 makes every rank exit within dist.timeout_s plus
# a few seconds, with a message naming the collective that timed out.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work  # a failed launch keeps its error files under TMPDIR
write_recipe "$work/recipe.yaml" 12

launch() {  # launch RUN_NAME [launcher options] : 2 ranks
  local name=$1
  shift
  "$xtrain" launch --nproc-per-node 2 --master-port "$(free_port)" "$@" -- \
    train "$work/recipe.yaml" --set run.dir="$work/$name" > "$work/$name.log" 2>&1
}

launch straight
XTRAIN_FAULT=kill:1:8 launch restarted --max-restarts 1 || {
  cat "$work/restarted.log"
  exit 1
}
grep -q "resumed from $work/restarted/checkpoints/step-5 at step 5" "$work/restarted.log"
for shard in shard-00000 shard-00001; do
  cmp "$work/straight/checkpoints/step-12/$shard.safetensors" "$work/restarted/checkpoints/step-12/$shard.safetensors"
done
diff <(without_timing "$work/straight/metrics.jsonl") <(without_timing "$work/restarted/metrics.jsonl")
echo "kill -9 at step 8, one restart: final weights bit-identical"

if XTRAIN_FAULT=kill:1:8 launch no_restart --max-restarts 0; then
  echo "expected a failure without restarts" >&2
  exit 1
fi
grep -q "rank.*1" "$work/no_restart.log" && grep -q "SIGKILL" "$work/no_restart.log" || {
  cat "$work/no_restart.log"
  exit 1
}
# Rank 0 reports the dead peer as dead, by rank, not as a timeout.
grep -q "^\[rank 0\]: error: [a-z_]* on group '[a-z]*' (ranks 0,1) failed: a peer closed its connection (.*). Dead: rank 1 (after step [0-9]*, last collective .*); its heartbeat stopped" "$work/no_restart.log" || {
  cat "$work/no_restart.log"
  exit 1
}
echo "kill -9 without restarts: the job fails naming rank 1 and SIGKILL; rank 0 reports rank 1 dead"

timeout_s=5
started=$(date +%s)
if XTRAIN_FAULT=stall:1:4 "$xtrain" launch --nproc-per-node 2 --master-port "$(free_port)" -- \
  train "$work/recipe.yaml" --set run.dir="$work/stalled" --set dist.timeout_s=$timeout_s > "$work/stalled.log" 2>&1; then
  echo "expected the stalled job to fail" >&2
  exit 1
fi
elapsed=$(($(date +%s) - started))
grep -q "did not complete within dist.timeout_s=$timeout_s" "$work/stalled.log" || {
  cat "$work/stalled.log"
  exit 1
}
stall_step=$(grep -c '"loss"' "$work/stalled/metrics.jsonl" || true)
echo "stalled rank: the job ended after ${elapsed}s (timeout ${timeout_s}s, stall after step $stall_step): $(grep -o "[a-z_]* on group '[a-z]*'" "$work/stalled.log" | head -1)"
(( elapsed <= timeout_s + 15 ))

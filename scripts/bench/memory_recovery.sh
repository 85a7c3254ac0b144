#!/usr/bin/env bash
# Recovery from the nodes' memory against recovery from disk, side by side: the same elastic run
# (three network-namespace nodes, one rank a node, --nnodes 2:3 --active-nodes 2, so node 2 waits
# as a hot spare) loses node 1 (SIGKILL to every process, its memory folder removed) once step-6 is
# on disk (and, with checkpoints in memory, its copy complete in node 0's memory: the copy runs in
# the background) and resumes from step-6 on nodes 0 and 2, three times:
#   disk (warm)   checkpoint.in_memory false; the checkpoint's pages still in the page cache, as
#                 on a local disk just written;
#   disk (cold)   the same after `echo 3 > /proc/sys/vm/drop_caches`, as a restarted job reads a
#                 shared file system that caches nothing for it;
#   memory        checkpoint.in_memory true: node 0 reads its own copy, the spare receives every
#                 file from node 0 over the link.
# For each: the seconds the restarted ranks spent choosing, fetching, verifying and reading the
# checkpoint (metrics.jsonl's resume_read_s, rank 0), the kill to the first step after the resume,
# and what saving step-6 held the steps up (the copy to memory runs beside them).
#   scripts/bench/memory_recovery.sh [--hidden 1024] [--layers 8]
# The model's size sets the checkpoint's (weights and two AdamW moments, 12 bytes a parameter).
# Needs root and iproute2's `ip`; uses build/xtrain ($XTRAIN), built by scripts/build.sh if missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
hidden=1024 layers=8
while (($#)); do
  case $1 in
    --hidden) hidden=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
xtrain=${XTRAIN:-$PWD/build/xtrain}
[[ -x $xtrain ]] || bash scripts/build.sh > /dev/null
python=${XTRAIN_PYTHON:-.venv/bin/python3}
source tests/integration/lib/expect.sh
source tests/integration/lib/bridged_nodes.sh
bridged_session "xr$$" 3

cat > "$work/recipe.yaml" <<YAML
name: memory-recovery
model:
  hidden_size: $hidden
  num_layers: $layers
  num_heads: 16
  num_kv_heads: 4
data:
  seq_len: 32
train:
  steps: 12
  global_batch_size: 2
  micro_batch_size: 1
  log_every: 1
  threads: 1
optim:
  lr: 1.0e-4
checkpoint:
  every: 6
  keep: 2
YAML

# recover NAME IN_MEMORY DROP_CACHES PORT: one run, node 1 killed once step-6 is kept.
recover() {
  local run=$1 in_memory=$2 drop=$3
  port=$4
  sed -i "s/^  in_memory: .*//; s/^checkpoint:$/checkpoint:\n  in_memory: $in_memory/" "$work/recipe.yaml"
  start_with_spare "$run" 60
  wait_for "$work/$run.node0.log" "\[rank 0\]: step +7/" 600
  if [[ $in_memory == true ]]; then
    local deadline=$((SECONDS + 300))
    until (($(ls "$node_memory/node0/step-6" 2> /dev/null | grep -vc '\.part$') == $(ls "$work/$run/checkpoints/step-6" | wc -l))); do
      ((SECONDS < deadline)) || fail "$run: step-6 never reached node 0's memory"
      sleep 0.1
    done
  fi
  local killed
  killed=$(kill_node 1)
  rm -rf "$node_memory/node1"
  if [[ $drop == true ]]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi
  wait_all || { tail -n 30 "$work/$run".node*.log; fail "$run: the job did not survive the loss of node 1"; }
  local log0=$work/$run.node0.log
  expect_match "$log0" "attempt 1 runs on nodes 0,2 (2 ranks)"
  local next
  next=$(first_time "$log0" "\\[rank 0\\]: step +[0-9]+/" "$(first_time "$log0" "resumed from" "$killed")")
  "$python" - "$work/$run" "$run" "$(awk -v k="$killed" -v n="$next" 'BEGIN { print n - k }')" <<'PY'
import json, sys
folder, name, kill_to_step = sys.argv[1], sys.argv[2], float(sys.argv[3])
records = [json.loads(line) for line in open(f"{folder}/metrics.jsonl")]
resume = [r for r in records if "resume_source" in r][-1]
saved = [r for r in records if r.get("step") == 6 and "checkpoint_blocking_s" in r][0]
print(f"| {name} | {resume['resume_source']} | {resume['step']} | {resume['resume_read_s']:.2f} | {kill_to_step:.2f} "
      f"| {saved['checkpoint_blocking_s']:.2f} |")
PY
}

echo "recipe: hidden $hidden, $layers layers; checkpoint.every 6, node 1 killed once step-6 is kept"
echo "| run | read from | step | resume_read_s | kill to next step (s) | step-6 save held the steps (s) |"
echo "|---|---|---|---|---|---|"
recover disk_warm false false 29500
recover disk_cold false true 29600
recover memory true false 29700
grep -o 'model: [0-9]* parameters' "$work/memory.node0.log" | head -n 1
echo "a checkpoint: $(du -shL "$work/memory/checkpoints/latest" | cut -f1) (weights and two AdamW moments in 2 shards)"

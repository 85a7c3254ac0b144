#!/usr/bin/env bash
# Resume is exact: 40 steps straight, and 20 steps (--stop-at-step) then a new process that
# resumes to 40, give bit-identical weights and optimizer state and identical per-step losses.
set -euo pipefail
xtrain=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/recipe.yaml" <<'YAML'
name: resume-check
model:
  hidden_size: 64
  num_layers: 2
  num_heads: 4
  num_kv_heads: 2
data:
  seq_len: 64
train:
  steps: 40
  global_batch_size: 8
  micro_batch_size: 4
  log_every: 10
  threads: 1
optim:
  lr: 3.0e-3
  warmup_steps: 5
checkpoint:
  every: 15
YAML
"$xtrain" train "$work/recipe.yaml" --set run.dir="$work/straight" > "$work/straight.log"
"$xtrain" train "$work/recipe.yaml" --set run.dir="$work/resumed" --stop-at-step 20 > "$work/first.log"
grep -q "stopped at step 20 of 40" "$work/first.log"
"$xtrain" train "$work/recipe.yaml" --set run.dir="$work/resumed" > "$work/second.log"
grep -q "resumed from .*step-20 at step 20" "$work/second.log"

for file in model.safetensors optimizer.safetensors; do
  cmp "$work/straight/checkpoints/step-40/$file" "$work/resumed/checkpoints/step-40/$file"
done
# Per-step records without the timing fields must match exactly, all 40 of them; the resumed run
# also says where it resumed from.
grep -q '^{"step":20,"resumed_from":"[^"]*/resumed/checkpoints/step-20","resume_source":"disk","resume_read_s":' \
  "$work/resumed/metrics.jsonl"
strip() { grep -v '"checkpoint":\|"resumed_from":' "$1" | sed -E 's/,"tokens_per_s":[^,]*,"step_s":[^,]*//; s/,"peak_rss_mib":[^}]*//'; }
diff <(strip "$work/straight/metrics.jsonl") <(strip "$work/resumed/metrics.jsonl")
[[ $(grep -c '"loss"' "$work/resumed/metrics.jsonl") -eq 40 ]]
# keep: 3 checkpoints at most (15, 30, 40; the resumed run also wrote 20).
ls "$work/resumed/checkpoints" | grep -c '^step-' | grep -qx 3
echo "resume: 40 steps straight == 20 + resumed 20, bit-identical"

#!/usr/bin/env bash
# 1-bit Adam under DDP over 2 ranks resumes bit-exactly across its freeze point after kill -9:
# 20 steps straight, and a run killed once a checkpoint after the freeze (step 6) exists, then
# restarted, end with the same weights, moments, per-rank error buffers and per-step records.
# Layouts it cannot be exact on are refused as bad input (exit 2).
set -euo pipefail
xtrain=$1
srcdir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$srcdir/tests/integration/lib/distributed.sh"
write_recipe "$work/recipe.yaml" 20
onebit=(--set optim.name=onebit_adam --set optim.freeze_step=6 --set parallel.dp=2 --set parallel.fsdp=1)

status=0
"$xtrain" validate "$work/recipe.yaml" --set optim.name=onebit_adam > "$work/fsdp.log" 2>&1 || status=$?
[[ $status -eq 2 ]] && grep -q "parallel.dp: 1: optim.name onebit_adam compresses" "$work/fsdp.log"
status=0
"$xtrain" validate "$work/recipe.yaml" "${onebit[@]}" --set parallel.tp=2 > "$work/tp.log" 2>&1 || status=$?
[[ $status -eq 2 ]] && grep -q "parallel.tp: 2: optim.name onebit_adam is defined over the replicas" "$work/tp.log"

train straight 2 "${onebit[@]}"
grep -q "onebit" "$work/straight/checkpoints/step-20/optimizer-rank-1.safetensors"

# The second run, killed with -9 (its launcher and ranks) once step 10's checkpoint is in place.
setsid "$xtrain" launch --nproc-per-node 2 --master-port "$(free_port)" -- train "$work/recipe.yaml" \
  --set run.dir="$work/killed" "${onebit[@]}" > "$work/killed.log" 2>&1 &
launcher=$!
for _ in $(seq 600); do
  [[ -e "$work/killed/checkpoints/step-10/manifest.json" ]] && break
  sleep 0.05
done
kill -9 -- -"$launcher" 2> /dev/null || true
wait "$launcher" 2> /dev/null || true
[[ ! -e "$work/killed/checkpoints/step-20" ]] || { echo "the run ended before it was killed"; exit 1; }
train killed 2 "${onebit[@]}"
grep -q "resumed from" "$work/killed.log"

compared=0
for path in "$work/straight/checkpoints/step-20/"*.safetensors; do
  cmp "$path" "$work/killed/checkpoints/step-20/${path##*/}"
  compared=$((compared + 1))
done
((compared == 3))  # the weights and moments, and each rank's error buffers
diff <(without_timing "$work/straight/metrics.jsonl") <(without_timing "$work/killed/metrics.jsonl")
echo "onebit_adam: killed -9 after the freeze and resumed: weights, moments and error buffers bit-identical"

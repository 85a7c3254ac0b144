#!/usr/bin/env bash
# 1-bit Adam under DDP over 2 ranks and HSDP (dp 2 x fsdp 2, 4 ranks) resumes bit-exactly across
# its freeze point after kill -9: 20 steps straight, and a run killed once a checkpoint after the
# freeze (step 6) exists, then restarted, end with the same weights, moments, per-rank error
# buffers and per-step records.
# Layouts it cannot be exact on are refused as bad input (exit 2).
set -euo pipefail
xtrain=$1
srcdir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$srcdir/tests/integration/lib/distributed.sh"
source "$srcdir/tests/integration/lib/expect.sh"
write_recipe "$work/recipe.yaml" 20
onebit=(--set optim.name=onebit_adam --set optim.freeze_step=6 --set parallel.dp=2 --set parallel.fsdp=1)

expect_refusal 2 "$work/fsdp.log" "parallel.dp: 1: optim.name onebit_adam compresses" \
  "$xtrain" validate "$work/recipe.yaml" --set optim.name=onebit_adam
expect_refusal 2 "$work/tp.log" "parallel.tp: 2: optim.name onebit_adam is defined over the replicas" \
  "$xtrain" validate "$work/recipe.yaml" "${onebit[@]}" --set parallel.tp=2

# kill_and_resume NAME NPROC FILES ARGS...: NAME-straight runs 20 steps; NAME-killed is killed with -9
# (its launcher and ranks) once step 10's checkpoint is in place, then restarted; both must end
# with bit-identical checkpoint files (FILES of them: the weights and moments, and each rank's
# error buffers) and records.
kill_and_resume() {
  local name=$1 nproc=$2 files=$3
  shift 3
  train "$name-straight" "$nproc" "$@"
  grep -q "onebit" "$work/$name-straight/checkpoints/step-20/optimizer-rank-$((nproc - 1)).safetensors"
  setsid "$xtrain" launch --nproc-per-node "$nproc" --master-port "$(free_port)" -- train "$work/recipe.yaml" \
    --set run.dir="$work/$name-killed" "$@" > "$work/$name-killed.log" 2>&1 &
  local launcher=$!
  for _ in $(seq 1200); do
    [[ -e "$work/$name-killed/checkpoints/step-10/manifest.json" ]] && break
    sleep 0.05
  done
  kill -9 -- -"$launcher" 2> /dev/null || true
  wait "$launcher" 2> /dev/null || true
  [[ ! -e "$work/$name-killed/checkpoints/step-20" ]] || { echo "$name: the run ended before it was killed"; exit 1; }
  train "$name-killed" "$nproc" "$@"
  grep -q "resumed from" "$work/$name-killed.log"
  local compared=0 path
  for path in "$work/$name-straight/checkpoints/step-20/"*.safetensors; do
    cmp "$path" "$work/$name-killed/checkpoints/step-20/${path##*/}"
    compared=$((compared + 1))
  done
  ((compared == files)) || { echo "$name: $compared checkpoint files, expected $files"; exit 1; }
  echo "$name: $compared checkpoint files bit-identical after kill -9 and resume"
  diff <(without_timing "$work/$name-straight/metrics.jsonl") <(without_timing "$work/$name-killed/metrics.jsonl")
}

kill_and_resume ddp 2 3 "${onebit[@]}"
# The recipe's beta2 0.95 is warned of; the paper's 0.999 is not.
grep -q "warning: optim.betas \[_, 0.95\] with onebit_adam: the variance frozen at optim.freeze_step averages only the last ~20 steps" \
  "$work/ddp-straight.log"
# HSDP: the momenta of each FSDP shard are exchanged over its replicas (dp 2 x fsdp 2).
kill_and_resume hsdp 4 6 --set optim.name=onebit_adam --set optim.freeze_step=6 --set parallel.dp=2 --set parallel.fsdp=2 \
  --set "optim.betas=[0.9, 0.999]"
if grep -q "optim.betas" "$work/hsdp-straight.log"; then echo "hsdp: beta2 0.999 was warned of"; exit 1; fi
echo "onebit_adam: DDP 2 and HSDP 2 x 2 killed -9 after the freeze and resumed: weights, moments and error buffers bit-identical"

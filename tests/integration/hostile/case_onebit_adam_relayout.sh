#!/usr/bin/env bash
# 1-bit Adam past its freeze resumes under another layout with the same replicas: a DDP 2
# checkpoint (step 2, freeze at step 1) resumes as HSDP 2 x 2 (parallel.dp 2, fsdp 2, 4 ranks)
# and trains on, warning once that the error feedback, per shard of the saved layout, starts at
# zero; the reverse (HSDP 2 x 2 -> DDP 2) too. Another number of replicas (parallel.dp 4) is
# refused with exit 2, naming the checkpoint's and the run's replicas and what resumes.
source "$(dirname "$0")/lib.sh"
write_recipe "$work/recipe.yaml" 2
onebit=(--set optim.name=onebit_adam --set optim.freeze_step=1 --set "optim.betas=[0.9, 0.999]"
  --set optim.warmup_steps=1 --set parallel.dp=2)
launch() {  # launch NAME EXIT NPROC ARGS...: trains into $work/NAME, its output in $work/NAME.log
  local name=$1 code=$2 nproc=$3
  shift 3
  expect_exit "$code" "$work/$name.log" "$xtrain" launch --nproc-per-node "$nproc" --master-port "$(free_port)" -- \
    train "$work/recipe.yaml" --set run.dir="$work/$name" "${onebit[@]}" "$@"
}

launch ddp 0 2 --set parallel.fsdp=1
mkdir "$work/dp4"
cp -a "$work/ddp/checkpoints" "$work/dp4/"
launch ddp 0 4 --set parallel.fsdp=2 --set train.steps=3
expect_text "$work/ddp.log" "resumed from $work/ddp/checkpoints/step-2 at step 2"
expect_text "$work/ddp.log" "warning: $work/ddp/checkpoints/step-2/optimizer-rank-0.safetensors was saved under another layout, and 1-bit Adam's error feedback is per FSDP shard of that layout: it starts at zero here"
[[ $(grep -c "was saved under another layout" "$work/ddp.log") -eq 1 ]] || fail "the layout warning is not printed once"
expect_text "$work/ddp.log" "step 3/3"

launch ddp 0 2 --set parallel.fsdp=1 --set train.steps=4
expect_text "$work/ddp.log" "resumed from $work/ddp/checkpoints/step-3 at step 3"
expect_text "$work/ddp.log" "was saved under another layout"

launch dp4 2 4 --set parallel.dp=4 --set parallel.fsdp=1 --set train.steps=3
expect_text "$work/dp4.log" "$work/dp4/checkpoints/step-2/optimizer-rank-0.safetensors: 1-bit Adam was past optim.freeze_step over 2 replicas, and this run has 4 (parallel.dp 4); the compressed stage averages the momenta over the replicas it was frozen with, so it resumes only with parallel.dp 2 (any parallel.fsdp)"
echo "onebit_adam: DDP 2 <-> HSDP 2 x 2 resume past the freeze, warned of once; parallel.dp 4 refused"

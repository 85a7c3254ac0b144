#!/usr/bin/env bash
# Keys that do nothing in the recipe they are in are warned of once on stderr, naming the key:
# precision.fp8_grad and precision.fp8_all_gather set while precision.fp8 is off, and 1-bit
# Adam's optim.freeze_step at or past train.steps (the whole run is then plain AdamW). The runs
# go on (exit 0); the same recipes without those keys print no such warning.
source "$(dirname "$0")/lib.sh"
write_recipe "$work/recipe.yaml" 2
run() {  # run NAME EXIT ARGS...: trains 2 steps into $work/NAME, stderr in $work/NAME.err
  local name=$1 code=$2
  shift 2
  expect_exit "$code" "$work/$name.log" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/$name" \
    --set optim.warmup_steps=1 "$@"
}

run fp8 0 --set precision.fp8_grad=e5m2 --set precision.fp8_all_gather=off
expect_text "$work/fp8.log" "warning: precision.fp8_grad e5m2 has no effect: precision.fp8 is off, so no FP8 GEMM runs and this run trains in train.dtype; set precision.fp8 to use it, or leave precision.fp8_grad at auto"
expect_text "$work/fp8.log" "warning: precision.fp8_all_gather off has no effect: precision.fp8 is off"
[[ $(grep -c "has no effect" "$work/fp8.log") -eq 2 ]] || fail "not one warning per key"
run fp8-auto 0 --set precision.fp8_grad=auto
! grep -q "has no effect" "$work/fp8-auto.log" || fail "fp8_grad auto warned of"

onebit=(--set optim.name=onebit_adam --set parallel.dp=2 --set parallel.fsdp=1 --set "optim.betas=[0.9, 0.999]")
expect_exit 0 "$work/onebit.log" "$xtrain" launch --nproc-per-node 2 --master-port "$(free_port)" -- train \
  "$work/recipe.yaml" --set run.dir="$work/onebit" --set optim.warmup_steps=1 "${onebit[@]}" --set optim.freeze_step=5
expect_text "$work/onebit.log" "warning: optim.freeze_step 5 with train.steps 2: onebit_adam compresses only after step 5, so this run is plain AdamW throughout"
[[ $(grep -c "optim.freeze_step 5 with train.steps 2" "$work/onebit.log") -eq 1 ]] || fail "the freeze_step warning is not printed once"
expect_exit 0 "$work/onebit-early.log" "$xtrain" launch --nproc-per-node 2 --master-port "$(free_port)" -- train \
  "$work/recipe.yaml" --set run.dir="$work/onebit-early" --set optim.warmup_steps=1 "${onebit[@]}" --set optim.freeze_step=1
! grep -q "optim.freeze_step" "$work/onebit-early.log" || fail "a freeze before the last step warned of"
echo "keys without effect: fp8_grad, fp8_all_gather with fp8 off and freeze_step past train.steps warned of once each"

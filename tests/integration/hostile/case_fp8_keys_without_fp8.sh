#!/usr/bin/env bash
# precision.fp8_grad and precision.fp8_all_gather set while precision.fp8 is off do nothing: the
# run goes on (exit 0: turning FP8 off with --set leaves a recipe's other FP8 keys in place) and
# warns once per key on stderr, naming it; auto is not warned of.
source "$(dirname "$0")/lib.sh"
write_recipe "$work/recipe.yaml" 2
expect_exit 0 "$work/fp8.log" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/fp8" --set optim.warmup_steps=1 \
  --set precision.fp8_grad=e5m2 --set precision.fp8_all_gather=off
expect_text "$work/fp8.log" "warning: precision.fp8_grad e5m2 has no effect: precision.fp8 is off, so no FP8 GEMM runs and this run trains in train.dtype; set precision.fp8 to use it, or leave precision.fp8_grad at auto"
expect_text "$work/fp8.log" "warning: precision.fp8_all_gather off has no effect: precision.fp8 is off"
[[ $(grep -c "has no effect" "$work/fp8.log") -eq 2 ]] || fail "not one warning per key"
expect_exit 0 "$work/auto.log" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/auto" --set optim.warmup_steps=1 \
  --set precision.fp8_grad=auto
! grep -q "has no effect" "$work/auto.log" || fail "fp8_grad auto warned of"
echo "fp8 keys with fp8 off: warned of once each, naming the key"

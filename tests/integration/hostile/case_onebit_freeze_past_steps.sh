#!/usr/bin/env bash
# 1-bit Adam's optim.freeze_step at or past train.steps makes the whole run plain AdamW: start-up
# warns once, naming both values (exit 0); a freeze before the last step is not warned of.
source "$(dirname "$0")/lib.sh"
write_recipe "$work/recipe.yaml" 2
onebit=(--set optim.name=onebit_adam --set parallel.dp=2 --set parallel.fsdp=1 --set "optim.betas=[0.9, 0.999]"
  --set optim.warmup_steps=1)
expect_exit 0 "$work/late.log" "$xtrain" launch --nproc-per-node 2 --master-port "$(free_port)" -- train \
  "$work/recipe.yaml" --set run.dir="$work/late" "${onebit[@]}" --set optim.freeze_step=5
expect_text "$work/late.log" "warning: optim.freeze_step 5 with train.steps 2: onebit_adam compresses only after step 5, so this run is plain AdamW throughout"
[[ $(grep -c "optim.freeze_step 5 with train.steps 2" "$work/late.log") -eq 1 ]] || fail "the warning is not printed once"
expect_exit 0 "$work/early.log" "$xtrain" launch --nproc-per-node 2 --master-port "$(free_port)" -- train \
  "$work/recipe.yaml" --set run.dir="$work/early" "${onebit[@]}" --set optim.freeze_step=1
! grep -q "optim.freeze_step" "$work/early.log" || fail "a freeze before the last step warned of"
echo "onebit_adam: freeze_step past train.steps warned of once, naming both"

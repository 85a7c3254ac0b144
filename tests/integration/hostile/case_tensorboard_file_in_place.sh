#!/usr/bin/env bash
# A file where the run writes its tensorboard/ folder is refused with exit 2 naming the path and
# the fix, before the run writes anything (no metrics.jsonl); the file is unchanged.
source "$(dirname "$0")/lib.sh"
write_recipe "$work/recipe.yaml" 2
mkdir "$work/run"
echo "not a folder" > "$work/run/tensorboard"
guard_neighbours "$work/run"
expect_exit 2 "$work/train.log" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/run" --set optim.warmup_steps=1
expect_text "$work/train.log" "$work/run/tensorboard is a file, where the run writes its TensorBoard event files: move it away, or set metrics.tensorboard: false"
[[ ! -e $work/run/metrics.jsonl ]] || fail "metrics.jsonl was begun before the refusal"
[[ $(cat "$work/run/tensorboard") == "not a folder" ]] || fail "the file in place of tensorboard/ changed"
echo "tensorboard: a file in its place refused with exit 2 before any output"

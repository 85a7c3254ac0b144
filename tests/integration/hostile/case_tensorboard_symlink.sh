#!/usr/bin/env bash
# run.dir/tensorboard as a symbolic link to a folder outside the run is refused with exit 2
# naming the link, as a linked run.dir is (case_write_through_symlinks.sh): a run writes only into
# its own folder. Nothing outside changes.
source "$(dirname "$0")/lib.sh"
write_recipe "$work/recipe.yaml" 2
mkdir -p "$work/run" "$work/outside"
echo "precious" > "$work/outside/file"
guard_neighbours "$work/outside"
ln -s "$work/outside" "$work/run/tensorboard"
expect_exit 2 "$work/train.log" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/run" --set optim.warmup_steps=1
expect_text "$work/train.log" "$work/run/tensorboard is a symbolic link (to $work/outside); a run writes only into a real folder: remove the link (the run makes the folder itself), or set metrics.tensorboard: false"
check_neighbours "$work/outside"
echo "tensorboard: a link in its place refused with exit 2, nothing written outside the run"

#!/usr/bin/env bash
# TensorBoard on a full disk (a tmpfs filled to the last byte, mounted as run.dir/tensorboard):
# metrics are not the model, so the run trains on and ends with exit 0, warning once on stderr
# naming the event file and the error; metrics.jsonl holds every step and no empty event file
# is left.
source "$(dirname "$0")/lib.sh"
write_recipe "$work/recipe.yaml" 2
mkdir -p "$work/full/tensorboard"
mount -t tmpfs -o size=64k tmpfs "$work/full/tensorboard" || fail "cannot mount a tmpfs (the case needs root)"
trap 'umount "$work/full/tensorboard" 2> /dev/null || true' EXIT
dd if=/dev/zero of="$work/full/tensorboard/filler" bs=4k 2> /dev/null || true
expect_exit 0 "$work/full.log" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/full" --set optim.warmup_steps=1
expect_text "$work/full.log" "warning: TensorBoard: cannot write $work/full/tensorboard/events.out.tfevents."
expect_text "$work/full.log" ": No space left on device; the run goes on without TensorBoard scalars from here (metrics.jsonl has every figure): free space in $work/full/tensorboard, or set metrics.tensorboard: false"
[[ $(grep -c "warning: TensorBoard" "$work/full.log") -eq 1 ]] || fail "the TensorBoard warning is not printed exactly once"
[[ $(grep -c '"loss"' "$work/full/metrics.jsonl") -eq 2 ]] || fail "metrics.jsonl does not hold both steps"
[[ -z $(find "$work/full/tensorboard" -name 'events.out.tfevents.*' -size 0) ]] || fail "an empty event file was left"
echo "tensorboard: a full disk warned of once, naming the file; the run trained on"

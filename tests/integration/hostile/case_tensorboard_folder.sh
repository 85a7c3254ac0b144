#!/usr/bin/env bash
# The run's tensorboard folder, made hostile: on a full disk (a tmpfs filled to the last byte,
# mounted as run.dir/tensorboard) the run trains on and ends with exit 0, warning once on stderr
# naming the event file and the error, and leaves no empty event file; a file in place of the
# folder, and a symbolic link to a folder outside the run, are refused with exit 2 naming the
# path and the fix, before metrics.jsonl is begun, and nothing outside the run changes.
source "$(dirname "$0")/lib.sh"
write_recipe "$work/recipe.yaml" 2
run() {  # run NAME EXIT: trains 2 steps into $work/NAME, its output in $work/NAME.log
  expect_exit "$2" "$work/$1.log" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/$1" \
    --set optim.warmup_steps=1
}

mkdir -p "$work/full/tensorboard"
mount -t tmpfs -o size=64k tmpfs "$work/full/tensorboard" || fail "cannot mount a tmpfs (the case needs root)"
trap 'umount "$work/full/tensorboard" 2> /dev/null || true' EXIT
dd if=/dev/zero of="$work/full/tensorboard/filler" bs=4k 2> /dev/null || true
run full 0
expect_text "$work/full.log" "warning: TensorBoard: cannot write $work/full/tensorboard/events.out.tfevents."
expect_text "$work/full.log" ": No space left on device; the run goes on without TensorBoard scalars from here (metrics.jsonl has every figure): free space in $work/full/tensorboard, or set metrics.tensorboard: false"
[[ $(grep -c "warning: TensorBoard" "$work/full.log") -eq 1 ]] || fail "the TensorBoard warning is not printed exactly once"
[[ $(grep -c '"loss"' "$work/full/metrics.jsonl") -eq 2 ]] || fail "metrics.jsonl does not hold both steps"
[[ -z $(find "$work/full/tensorboard" -name 'events.out.tfevents.*' -size 0) ]] || fail "an empty event file was left"

mkdir "$work/filed"
echo "not a folder" > "$work/filed/tensorboard"
run filed 2
expect_text "$work/filed.log" "$work/filed/tensorboard is a file, where the run writes its TensorBoard event files: move it away, or set metrics.tensorboard: false"
[[ ! -e $work/filed/metrics.jsonl ]] || fail "metrics.jsonl was begun before the refusal"

mkdir -p "$work/linked" "$work/outside"
echo "precious" > "$work/outside/file"
guard_neighbours "$work/outside"
ln -s "$work/outside" "$work/linked/tensorboard"
run linked 2
expect_text "$work/linked.log" "$work/linked/tensorboard is a symbolic link (to $work/outside); a run writes only into a real folder: remove the link (the run makes the folder itself), or set metrics.tensorboard: false"
check_neighbours "$work/outside"
echo "tensorboard: a full disk warned of once and trained on; a file or a link in its place refused"

#!/usr/bin/env bash
# TensorBoard on a full disk (a tmpfs filled to the last byte, mounted as run.dir/tensorboard):
# metrics are not the model, so the run trains on and ends with exit 0, warning once on stderr
# naming the event file and the error; metrics.jsonl holds every step and no empty event file
# is left. A disk that fills in the middle of the run (one free page: the recipe and step 1 fit)
# is warned of once too, and the event file ends on a whole record, which TensorBoard's own
# reader loads up to the step before the failure. The pages left free are those the event file
# of a one-step run takes (the resolved recipe grows as keys are added), each later step ~300 bytes.
source "$(dirname "$0")/lib.sh"
write_recipe "$work/recipe.yaml" 2
mkdir -p "$work/full/tensorboard" "$work/late/tensorboard"
mount -t tmpfs -o size=64k tmpfs "$work/full/tensorboard" || fail "cannot mount a tmpfs (the case needs root)"
trap 'umount "$work/full/tensorboard" "$work/late/tensorboard" 2> /dev/null || true' EXIT
dd if=/dev/zero of="$work/full/tensorboard/filler" bs=4k 2> /dev/null || true
expect_exit 0 "$work/full.log" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/full" --set optim.warmup_steps=1
expect_text "$work/full.log" "warning: TensorBoard: cannot write $work/full/tensorboard/events.out.tfevents."
expect_text "$work/full.log" ": No space left on device; the run goes on without TensorBoard scalars from here (metrics.jsonl has every figure): free space in $work/full/tensorboard, or set metrics.tensorboard: false"
[[ $(grep -c "warning: TensorBoard" "$work/full.log") -eq 1 ]] || fail "the TensorBoard warning is not printed exactly once"
[[ $(grep -c '"loss"' "$work/full/metrics.jsonl") -eq 2 ]] || fail "metrics.jsonl does not hold both steps"
[[ -z $(find "$work/full/tensorboard" -name 'events.out.tfevents.*' -size 0) ]] || fail "an empty event file was left"

expect_exit 0 "$work/probe.log" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/probe" --set optim.warmup_steps=1 \
  --set train.steps=1
probe_bytes=$(stat -c %s "$work"/probe/tensorboard/events.out.tfevents.*)
mount -t tmpfs -o size=64k tmpfs "$work/late/tensorboard" || fail "cannot mount a second tmpfs"
dd if=/dev/zero of="$work/late/tensorboard/filler" bs=4k count=$((16 - (probe_bytes + 4095) / 4096)) 2> /dev/null
expect_exit 0 "$work/late.log" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/late" --set optim.warmup_steps=1 \
  --set train.steps=20
expect_text "$work/late.log" ": No space left on device; the run goes on without TensorBoard scalars from here"
[[ $(grep -c "warning: TensorBoard" "$work/late.log") -eq 1 ]] || fail "mid-run: the warning is not printed once"
[[ $(grep -c '"loss"' "$work/late/metrics.jsonl") -eq 20 ]] || fail "mid-run: metrics.jsonl does not hold every step"
"${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}" - "$work/late/tensorboard" <<'PY' || fail "mid-run: the event file does not read"
import glob, sys
from tensorboard.backend.event_processing import event_file_loader
(path,) = glob.glob(f"{sys.argv[1]}/events.out.tfevents.*")
steps = [e.step for e in event_file_loader.EventFileLoader(path).Load() if any(v.tag == "loss" for v in e.summary.value)]
assert steps and steps == list(range(1, len(steps) + 1)) and len(steps) < 20, steps
print(f"mid-run: the event file reads, loss at steps {steps[0]}-{steps[-1]}")
PY
echo "tensorboard: a full disk, at the start or mid-run, warned of once, naming the file; the run trained on"

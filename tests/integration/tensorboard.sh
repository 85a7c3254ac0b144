#!/usr/bin/env bash
# TensorBoard's own reader (tensorboard's EventAccumulator) reads run.dir/tensorboard back: every
# scalar equals metrics.jsonl, step for step (as float32, TensorBoard's scalar type; where
# metrics.jsonl holds a step twice, its last record), with the resolved recipe as text, for a run
# killed after its step-10 checkpoint with steps 11-12 written and then resumed (TensorBoard drops
# the killed session's 11-12), and for a run that rolls back after a loss spike; and
# metrics.tensorboard false writes no event file.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work
write_recipe "$work/recipe.yaml" 14

if XTRAIN_FAULT=kill:0:13 "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/resumed" > "$work/killed.log" 2>&1; then
  echo "FAIL: the run meant to be killed at step 13 finished"; exit 1
fi
grep -q '"step":12,"loss"' "$work/resumed/metrics.jsonl" || { echo "FAIL: no step 12 before the kill"; exit 1; }
train resumed 1
grep -q "resumed from .*step-10 at step 10" "$work/resumed.log" || { cat "$work/resumed.log"; exit 1; }
XTRAIN_FAULT=spike:0:8 train rollback 1 --set train.spike_window=4 --set train.log_every=1 --set train.spike=rollback
grep -q '"rollback_to":5' "$work/rollback/metrics.jsonl" || { echo "FAIL: no rollback"; exit 1; }
train off 1 --set metrics.tensorboard=false --set train.steps=2
[[ ! -e $work/off/tensorboard ]] || { echo "FAIL: metrics.tensorboard false wrote $work/off/tensorboard"; exit 1; }

"${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}" - "$work" <<'PY'
import glob, json, sys
import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

work = sys.argv[1]
for run, files in (("resumed", 2), ("rollback", 1)):
    folder = f"{work}/{run}/tensorboard"
    found = glob.glob(f"{folder}/events.out.tfevents.*")
    assert len(found) == files, (run, found)
    expected = {}  # tag -> step -> the last value metrics.jsonl gives it
    for record in map(json.loads, open(f"{work}/{run}/metrics.jsonl")):
        if "rollback_to" in record:
            continue
        for key, value in record.items():
            values = value if isinstance(value, list) else [value]
            for i, v in enumerate(values):
                if key != "step" and isinstance(v, (int, float)) and not isinstance(v, bool):
                    tag = f"{key}/{i}" if isinstance(value, list) else key
                    expected.setdefault(tag, {})[record["step"]] = v
    accumulator = EventAccumulator(folder, size_guidance={"scalars": 0, "tensors": 0})
    accumulator.Reload()
    tags = accumulator.Tags()
    assert sorted(tags["scalars"]) == sorted(expected), (run, sorted(tags["scalars"]), sorted(expected))
    compared = 0
    for tag, by_step in expected.items():
        events = accumulator.Scalars(tag)
        got = {e.step: e.value for e in events}
        assert len(events) == len(got), (run, tag, "a step shown twice", [e.step for e in events])
        assert got.keys() == by_step.keys(), (run, tag, sorted(got), sorted(by_step))
        for step, value in by_step.items():
            assert got[step] == float(np.float32(value)), (run, tag, step, got[step], value)
            compared += 1
    assert "recipe" in tags["tensors"], tags
    recipe = accumulator.Tensors("recipe")[0].tensor_proto.string_val[0].decode()
    assert "name: dist-check" in recipe, recipe[:200]
    losses = [e.step for e in accumulator.Scalars("loss")]
    print(f"{run}: {len(found)} event file(s), {len(expected)} scalar tags, {compared} values equal to metrics.jsonl; "
          f"loss at steps {losses[0]}-{losses[-1]}, each once")
PY
echo "tensorboard: ok"

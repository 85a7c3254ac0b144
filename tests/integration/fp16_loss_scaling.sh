#!/usr/bin/env bash
# fp16 dynamic loss scaling: a loss scale far too large makes the first steps' gradients
# overflow fp16; each such step is skipped (no update) and halves the scale, until the scale fits
# and training proceeds. The loss-scaler state is resumed exactly from a checkpoint.
set -euo pipefail
python=${XTRAIN_PYTHON:-$(dirname "$0")/../../.venv/bin/python3}
xtrain=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/recipe.yaml" <<'YAML'
name: fp16-check
model:
  hidden_size: 64
  num_layers: 2
  num_heads: 4
  num_kv_heads: 2
data:
  seq_len: 64
train:
  steps: 40
  global_batch_size: 4
  micro_batch_size: 4
  dtype: fp16
  log_every: 10
  threads: 1
optim:
  lr: 3.0e-3
  warmup_steps: 5
precision:
  loss_scale_initial: 4294967296
  loss_scale_growth_interval: 8
checkpoint:
  every: 20
YAML
"$xtrain" train "$work/recipe.yaml" --set run.dir="$work/run" > "$work/run.log"
grep -q "step 1: fp16 gradients overflowed at loss scale 4.29497e+09; step skipped, loss scale now 2.14748e+09" "$work/run.log"

"$python" - "$work/run/metrics.jsonl" <<'PY'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1]) if '"loss"' in line]
assert len(records) == 40, len(records)
skipped = [r["step"] for r in records if r["skipped"]]
scales = [r["loss_scale"] for r in records]
# Overflow happens first, halving the scale until it fits; afterwards an overflow is the
# exception (the scale grown again, or gradients grown under it), each halving the scale.
first = next(i for i, r in enumerate(records) if not r["skipped"])
assert first > 0 and skipped[:first] == list(range(1, first + 1)), skipped
assert len(skipped) - first <= (len(records) - first) // 4, (skipped, scales)
for a, b, r in zip(scales, scales[1:], records):
    if r["skipped"]:
        assert b == a / 2, (r["step"], a, b)
    else:
        assert b in (a, a * 2), (r["step"], a, b)
assert all(r["grad_norm"] is None for r in records if r["skipped"])
assert any(b == 2 * a for a, b in zip(scales, scales[1:])), "the scale never grew back"
losses = [r["loss"] for r in records if not r["skipped"]]
assert losses[-1] < losses[0] - 0.5, losses
print(f"fp16: {first} overflowed steps skipped (scale {scales[0]:g} -> {scales[first]:g}), {len(skipped) - first} "
      f"later, "
      f"loss {losses[0]:.3f} -> {losses[-1]:.3f}")
PY

# Stopping at step 20 and resuming must continue with the same loss scale and losses.
"$xtrain" train "$work/recipe.yaml" --set run.dir="$work/resumed" --stop-at-step 20 > /dev/null
"$xtrain" train "$work/recipe.yaml" --set run.dir="$work/resumed" > /dev/null
strip() { grep -v '"checkpoint":\|"resumed_from":' "$1" | sed -E 's/,"tokens_per_s":[^,]*,"step_s":[^,]*//; s/,"peak_rss_mib":[^,}]*//; s/,"peak_device_mib":[^,}]*//; s/,"data_wait_s":[^,}]*//; s/,"data_read_s":[^,}]*//'; }
diff <(strip "$work/run/metrics.jsonl") <(strip "$work/resumed/metrics.jsonl")
cmp "$work/run/checkpoints/step-40/model.safetensors" "$work/resumed/checkpoints/step-40/model.safetensors"

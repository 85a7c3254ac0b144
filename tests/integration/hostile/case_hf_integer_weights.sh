#!/usr/bin/env bash
# A Hugging Face folder whose tensor for a floating-point parameter is I32 or U8 (no quantization
# in config.json to make blocks and scales of it) is refused with exit 2 naming the file, the
# tensor and its dtype, before any step: it is not cast to floats in silence.
source "$(dirname "$0")/lib.sh"
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
write_recipe "$work/recipe.yaml" 1
train base 1 --set optim.warmup_steps=0
"$xtrain" export "$work/base/checkpoints/latest" "$work/folder" > /dev/null
rm "$work/folder/manifest.json"  # a plain Hugging Face folder, as a user's tools leave it
for dtype in int32 uint8; do
  cp -r "$work/folder" "$work/$dtype"
  "$python" - "$work/$dtype/model.safetensors" $dtype <<'PY'
import sys, torch
from safetensors.torch import load_file, save_file
path, dtype = sys.argv[1], getattr(torch, sys.argv[2])
tensors = load_file(path)
name = "model.layers.0.mlp.down_proj.weight"
tensors[name] = (tensors[name] * 1000).clamp(0, 255).to(dtype)
save_file(tensors, path, metadata={"format": "pt"})
PY
done
expect_exit 2 "$work/int32.out" "$xtrain" train "$work/recipe.yaml" --set model.init_from="hf:$work/int32" \
  --set run.dir="$work/run32"
expect_text "$work/int32.out" "$work/int32/model.safetensors: tensor 'model.layers.0.mlp.down_proj.weight' is I32, but the model's parameter it holds is floating point: write it as F32, BF16 or F16"
expect_exit 2 "$work/uint8.out" "$xtrain" train "$work/recipe.yaml" --set model.init_from="hf:$work/uint8" \
  --set run.dir="$work/run8"
expect_text "$work/uint8.out" "$work/uint8/model.safetensors: tensor 'model.layers.0.mlp.down_proj.weight' is U8, but"
[[ ! -e $work/run32/checkpoints && ! -e $work/run8/checkpoints ]] || fail "a refused run wrote a checkpoint"
echo "integer tensors under float parameters are refused"

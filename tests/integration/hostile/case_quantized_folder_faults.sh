#!/usr/bin/env bash
# Quantized Hugging Face folders that xtrain cannot dequantize as transformers would are refused
# with exit 2 naming the file, the tensor and what is wrong, before any step: an FP8 weight
# without its weight_scale_inv, block scales of the wrong shape, F8_E5M2 weights, FP8 weights
# under no quantization_config, an FP8 format or a quant_method xtrain does not read, mxfp4
# blocks without scales or with scales of the wrong shape. A well-formed FP8 folder (blocks of
# 128x128 over matrices of 64 and 192 rows: the last block of a side may be short) imports.
source "$(dirname "$0")/lib.sh"
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
write_recipe "$work/recipe.yaml" 1
train base 1 --set optim.warmup_steps=0
"$xtrain" export "$work/base/checkpoints/latest" "$work/folder" > /dev/null
rm "$work/folder/manifest.json"
"$python" - "$work" <<'PY'
import json, math, os, shutil, sys, torch
from safetensors.torch import load_file, save_file
work = sys.argv[1]
source = load_file(f"{work}/folder/model.safetensors")
config = json.load(open(f"{work}/folder/config.json"))
fp8 = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}

def quantized():  # each layer's matrix as F8_E4M3 with one float32 scale per 128x128 block
    tensors = {}
    for name, value in source.items():
        if not (name.startswith("model.layers.") and value.dim() == 2):
            tensors[name] = value
            continue
        rows, cols = value.shape
        grid = (math.ceil(rows / 128), math.ceil(cols / 128))
        scales = torch.rand(grid) * 0.01 + 0.001
        expanded = scales.repeat_interleave(128, 0)[:rows].repeat_interleave(128, 1)[:, :cols]
        tensors[name] = (value / expanded).clamp(-448, 448).to(torch.float8_e4m3fn)
        tensors[name + "_scale_inv"] = scales
    return tensors

def write(name, tensors, quantization):
    os.makedirs(f"{work}/{name}")
    save_file(tensors, f"{work}/{name}/model.safetensors", metadata={"format": "pt"})
    json.dump(dict(config, **({"quantization_config": quantization} if quantization else {})),
              open(f"{work}/{name}/config.json", "w"), indent=2)

write("fp8_ok", quantized(), fp8)
t = quantized(); del t["model.layers.0.mlp.up_proj.weight_scale_inv"]; write("missing_scale", t, fp8)
t = quantized(); t["model.layers.0.mlp.up_proj.weight_scale_inv"] = torch.ones(1, 1); write("scale_shape", t, fp8)
t = quantized(); t["model.layers.1.self_attn.o_proj.weight"] = t["model.layers.1.self_attn.o_proj.weight"].float().to(
    torch.float8_e5m2); write("e5m2", t, fp8)
write("fmt", quantized(), dict(fp8, fmt="e5m2"))
t = {n: v for n, v in quantized().items() if not n.endswith("_scale_inv")}; write("no_config", t, None)
write("awq", dict(source), {"quant_method": "awq", "bits": 4})
t = dict(source); t["model.layers.0.mlp.experts.down_proj_blocks"] = torch.zeros(2, 64, 6, 16, dtype=torch.uint8)
write("blocks_alone", t, {"quant_method": "mxfp4"})
t["model.layers.0.mlp.experts.down_proj_scales"] = torch.full((2, 64, 5), 127, dtype=torch.uint8)
write("blocks_scales_shape", t, {"quant_method": "mxfp4"})
PY
refused() {  # refused FOLDER TEXT
  expect_exit 2 "$work/$1.out" "$xtrain" train "$work/recipe.yaml" --set model.init_from="hf:$work/$1" \
    --set run.dir="$work/run_$1"
  expect_text "$work/$1.out" "$2"
  [[ ! -e $work/run_$1/checkpoints ]] || fail "the refused run of $1 wrote a checkpoint"
}
refused missing_scale "$work/missing_scale/model.safetensors: tensor 'model.layers.0.mlp.up_proj.weight' is F8_E4M3 but the folder has no 'model.layers.0.mlp.up_proj.weight_scale_inv', its block scales ($work/missing_scale/config.json: quant_method fp8)"
refused scale_shape "$work/scale_shape/model.safetensors: tensor 'model.layers.0.mlp.up_proj.weight_scale_inv' has shape [1, 1]; the block scales of 'model.layers.0.mlp.up_proj.weight' ([192, 64] in $work/scale_shape/model.safetensors) in blocks of 128x128 (quantization_config.weight_block_size) have shape [2, 1]"
refused e5m2 "$work/e5m2/model.safetensors: tensor 'model.layers.1.self_attn.o_proj.weight' is F8_E5M2; $work/e5m2/config.json (quant_method fp8) stores F8_E4M3 weights, the one FP8 format xtrain dequantizes"
refused fmt "$work/fmt/config.json: quantization_config.fmt is \"e5m2\": xtrain dequantizes FP8 weights of format \"e4m3\" (F8_E4M3) only"
refused no_config "$work/no_config/model.safetensors: tensor 'model.layers.0.mlp.down_proj.weight' is F8_E4M3 without scales: $work/no_config/config.json names no fp8 quantization_config"
refused awq "$work/awq/config.json: quantization_config.quant_method is \"awq\": xtrain dequantizes \"fp8\""
refused blocks_alone "$work/blocks_alone/model.safetensors: tensor 'model.layers.0.mlp.experts.down_proj_blocks' has no 'model.layers.0.mlp.experts.down_proj_scales' beside it"
refused blocks_scales_shape "$work/blocks_scales_shape/model.safetensors: tensor 'model.layers.0.mlp.experts.down_proj_scales' is U8 [2, 64, 5]; the scales of 'model.layers.0.mlp.experts.down_proj_blocks' (U8 [2, 64, 6, 16] in $work/blocks_scales_shape/model.safetensors) are U8 [2, 64, 6]"
expect_exit 0 "$work/fp8_ok.out" "$xtrain" train "$work/recipe.yaml" --set model.init_from="hf:$work/fp8_ok" \
  --set run.dir="$work/run_fp8_ok" --set optim.warmup_steps=0
expect_text "$work/fp8_ok.out" "model: initial weights from hf:$work/fp8_ok ("
echo "quantized folders xtrain cannot dequantize are refused; a well-formed one imports"

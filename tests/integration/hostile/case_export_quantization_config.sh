#!/usr/bin/env bash
# A folder whose config.json carries a quantization_config (fp8) over float weights imports (a
# weight without scales is read as stored, as transformers reads it), and the export of the
# fine-tuned run writes float weights under a config.json without quantization_config, which
# transformers would otherwise take for FP8 weights and scales it cannot find.
source "$(dirname "$0")/lib.sh"
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
write_recipe "$work/recipe.yaml" 1
train base 1 --set optim.warmup_steps=0
"$xtrain" export "$work/base/checkpoints/latest" "$work/folder" > /dev/null
rm "$work/folder/manifest.json"
"$python" - "$work/folder/config.json" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))
config["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                 "weight_block_size": [128, 128]}
json.dump(config, open(sys.argv[1], "w"), indent=2)
PY
train tuned 1 --set model.init_from="hf:$work/folder" --set optim.warmup_steps=0
expect_exit 0 "$work/export.out" "$xtrain" export "$work/tuned/checkpoints/latest" "$work/export"
! grep -q '"quantization_config"' "$work/export/config.json" || {
  cat "$work/export/config.json"
  fail "the export's config.json keeps quantization_config over float weights"
}
grep -q '"model_type": "llama"' "$work/export/config.json" || fail "the export's config.json lost its other fields"
echo "the export writes no quantization_config"

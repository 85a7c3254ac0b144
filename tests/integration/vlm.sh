#!/usr/bin/env bash
# LLaVA on image chat (a small set from tools/data/make_vlm_demo.py, with its random Hugging Face
# init): FSDP 2 with full recompute of half the vision blocks gives the per-step losses and final
# weights of one process (1e-5); a projector-only stage (model.freeze) leaves the tower and the
# language model bit-identical, as one process and under FSDP 2; a truncated PNG stops the run
# with exit 2 naming the record and file before any step, or is skipped and counted; the
# checkpoint generates from an image, and its export carries preprocessor_config.json.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
source "$srcdir/tests/integration/lib/expect.sh"
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
work=$(mktemp -d)
trap '[[ -n ${KEEP:-} ]] || rm -rf "$work"' EXIT
export TMPDIR=$work
"$python" "$srcdir/tools/data/make_vlm_demo.py" --out "$work/data" --train 48 --eval 16 --test 8 > /dev/null 2>&1
cat > "$work/recipe.yaml" <<YAML
name: vlm-check
model:
  family: llava
  init_from: hf:$work/data/init
data:
  train: $work/data/train.jsonl
  eval: $work/data/eval.jsonl
  tokenizer: byte
  seq_len: 160
train:
  steps: 8
  global_batch_size: 8
  micro_batch_size: 4
  log_every: 2
  threads: 1
optim:
  lr: 2.0e-3
  warmup_steps: 2
checkpoint:
  every: 4
  keep: 2
YAML

train single 1
train fsdp2 2 --set parallel.fsdp=2 --set memory.recompute=full --set memory.vision_recompute_ratio=0.5
grep -q "parallel: 2 ranks (torchrun), FSDP 2" "$work/fsdp2.log"
grep -q "^data: 48 images, 16 image tokens each$" "$work/single.log"
compare_runs "$work/single" "$work/fsdp2"

# Projector-only alignment: the frozen parts equal the initial weights bit for bit.
freeze=("--set" "model.freeze=[vision_tower, language_model]")
train frozen 1 "${freeze[@]}"
train frozen_fsdp2 2 --set parallel.fsdp=2 "${freeze[@]}"
grep -q "model: frozen vision_tower, language_model (820416 parameters); 24832 train" "$work/frozen.log"
compare_runs "$work/frozen" "$work/frozen_fsdp2"
"$python" - "$work" <<'PY'
import sys
from safetensors.torch import load_file
work = sys.argv[1]
initial = load_file(f"{work}/data/init/model.safetensors")
for run in ["frozen", "frozen_fsdp2"]:
    trained = load_file(f"{work}/{run}/export/model.safetensors")
    assert trained.keys() == initial.keys()
    frozen = [k for k in trained if not k.startswith("multi_modal_projector.")]
    moved = [k for k in trained if k.startswith("multi_modal_projector.")]
    assert all(bool((trained[k] == initial[k]).all()) for k in frozen)
    assert all(not bool((trained[k] == initial[k]).all()) for k in moved)
    print(f"{run}: {len(frozen)} frozen tensors bit-identical to the init, {len(moved)} projector tensors trained")
PY

# A truncated PNG in record 3: exit 2 naming the record and the file, before any step.
head -c 200 "$(ls "$work"/data/images/train-*.png | head -1)" > "$work/data/images/cut.png"
sed '3s#"images/train-[0-9]*\.[a-z]*"#"images/cut.png"#' "$work/data/train.jsonl" > "$work/data/bad.jsonl"
status=0
"$xtrain" train "$work/recipe.yaml" --set run.dir="$work/bad" --set data.train="$work/data/bad.jsonl" \
  > "$work/bad.log" 2>&1 || status=$?
[[ $status == 2 ]] || { cat "$work/bad.log"; echo "a truncated image exited $status"; exit 1; }
grep -q "bad.jsonl:3: image 1 of 1: $work/data/images/cut.png: truncated PNG" "$work/bad.log"
if grep -q "^step " "$work/bad.log" || [[ -e $work/bad ]]; then cat "$work/bad.log"; exit 1; fi
train skipped 1 --set data.train="$work/data/bad.jsonl" --set data.skip_bad_images=true --set train.steps=2
grep -q "^data: 47 images, 16 image tokens each; skipped 1 record with bad images$" "$work/skipped.log"

# Generation from an image, and an export with the image processor beside the weights.
answer=$("$xtrain" generate "$work/single/checkpoints/latest" --chat --prompt "What is in the picture?" \
  --image "$work/data/images/blank.png" --temperature 0 --max-new-tokens 40)
echo "generated: $answer"
cmp "$work/data/init/preprocessor_config.json" "$work/single/export/preprocessor_config.json"
expect_refusal 2 "$work/two.log" 'the prompt has 2 "<image>" placeholders but 1 --image files were given' \
  "$xtrain" generate "$work/single/checkpoints/latest" --prompt "<image> <image>" --image "$work/data/images/blank.png"
echo "vlm: parity, freeze, bad images and generate passed"

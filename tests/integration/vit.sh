#!/usr/bin/env bash
# ViT image classification (model.family vit) from a tiny random ViTForImageClassification that
# transformers writes, on a generated image set (tools/reference/vit_images.py: which quadrant
# holds the square, 4 labels): 20 steps as one process and as FSDP 2 give the same per-step
# losses and weights (1e-5), with model.dropout 0.1 too; after a longer run, xtrain's evaluation of held-out images and
# transformers' of the export agree (loss 1e-5, accuracy) and are well above chance (1/4); bad
# image records exit 2 naming the file and line. Augmentation (data.crop_scale, data.hflip):
# the pixels of 2,000 training images are Pillow's and torchvision's for the boxes and flips xtrain
# drew, whose statistics match torchvision's RandomResizedCrop.get_params (its algorithm in
# tools/reference/random_resized_crop.py); evaluation images are not augmented; FSDP 2 with
# augmentation equals one process; the keys on another family exit 2.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work
"$python" "$srcdir/tools/reference/golden_vit.py" make --out "$work/vit" --image-size 16 --patch-size 4 --labels 4 \
  --hidden 32 --layers 2 --seed 1
"$python" "$srcdir/tools/reference/vit_images.py" make --out "$work/images" --size 16 --train 256 --eval 128
cat > "$work/recipe.yaml" <<YAML
name: vit-check
model:
  family: vit
  init_from: hf:$work/vit
data:
  train: $work/images/train.jsonl
  seq_len: 17
train:
  steps: 20
  global_batch_size: 8
  micro_batch_size: 4
  log_every: 5
  threads: 1
optim:
  lr: 2.0e-3
  warmup_steps: 5
checkpoint:
  every: 10
  keep: 2
YAML

train single 1
train fsdp2 2 --set parallel.fsdp=2
grep -q "parallel: 2 ranks (torchrun), FSDP 2" "$work/fsdp2.log"
compare_runs "$work/single" "$work/fsdp2"
# With model.dropout 0.1 (keyed masks): FSDP 2 equals one process too, and step 1's loss moves.
train single-dropout 1 --set model.dropout=0.1
train fsdp2-dropout 2 --set model.dropout=0.1 --set parallel.fsdp=2
compare_runs "$work/single-dropout" "$work/fsdp2-dropout"
first_loss() { grep -m1 '"step":1,' "$1/metrics.jsonl" | sed -E 's/.*"loss":([^,]*),.*/\1/'; }
[[ $(first_loss "$work/single") != $(first_loss "$work/single-dropout") ]] || { echo "vit: dropout left the loss"; exit 1; }

# Augmentation: xtrain's draws for 2,000 images of 32 x 32 against torchvision's.
"$python" "$srcdir/tools/reference/vit_images.py" make --out "$work/large" --size 32 --train 2000 --eval 4 --seed 3
augment=(--set data.crop_scale=[0.08,1.0] --set data.hflip=0.5)
"$xtrain" data batch "$work/recipe.yaml" --set data.train="$work/large/train.jsonl" "${augment[@]}" --split train \
  --count 2000 --out "$work/augmented.safetensors" > /dev/null
"$python" "$srcdir/tools/reference/random_resized_crop.py" check --batch "$work/augmented.safetensors" \
  --data "$work/large/train.jsonl" --image-size 16
"$xtrain" data batch "$work/recipe.yaml" --set data.eval="$work/large/eval.jsonl" "${augment[@]}" --split eval \
  --count 4 --out "$work/eval.safetensors" > /dev/null
"$python" - "$work/eval.safetensors" <<'PY'
import sys
from safetensors.numpy import load_file
tensors = load_file(sys.argv[1])
assert "pixel_values" in tensors and "augmentation" not in tensors, sorted(tensors)
PY
# Each sample's draw is a function of (run.seed, sample): FSDP 2 crops and mirrors as one process.
train single-augmented 1 --set data.crop_scale=[0.5,1.0] --set data.hflip=0.5 --set train.steps=10
train fsdp2-augmented 2 --set data.crop_scale=[0.5,1.0] --set data.hflip=0.5 --set train.steps=10 --set parallel.fsdp=2
compare_runs "$work/single-augmented" "$work/fsdp2-augmented"
[[ $(first_loss "$work/single") != $(first_loss "$work/single-augmented") ]] || { echo "vit: augmentation left the loss"; exit 1; }

# The demo: 300 steps of 16 images, then the 128 held-out images: xtrain's evaluation and
# transformers' on the export give the same loss and accuracy, well above chance.
train demo 1 --set train.steps=300 --set train.global_batch_size=16 --set train.micro_batch_size=16 \
  --set train.log_every=50 --set checkpoint.every=300 --set optim.warmup_steps=20 \
  --set data.eval="$work/images/eval.jsonl" --set train.eval_every=300
export_latest "$work/demo"
result=$("$python" "$srcdir/tools/reference/vit_images.py" accuracy --model "$work/demo/export" \
  --data "$work/images/eval.jsonl")
"$python" - "$work/demo/metrics.jsonl" "$result" <<'PY'
import json, re, sys
ours = [json.loads(line) for line in open(sys.argv[1]) if "eval_loss" in line][-1]
accuracy, loss = (float(x) for x in re.search(r"accuracy ([0-9.]+) .* loss ([0-9.e-]+)", sys.argv[2]).groups())
print(f"held-out (128 images, chance 0.25): accuracy xtrain {ours['eval_accuracy']:.4f}, transformers {accuracy:.4f}; "
      f"loss xtrain {ours['eval_loss']:.6f}, transformers {loss:.6f} "
      f"(relative difference {abs(ours['eval_loss'] - loss) / loss:.1e})")
assert accuracy >= 0.6 and abs(ours["eval_accuracy"] - accuracy) <= 1e-4, (ours, accuracy)
assert abs(ours["eval_loss"] - loss) <= 1e-5 * loss, (ours, loss)
PY

# Bad records: a missing image, a label out of range, an undecodable file, each exit 2 naming
# the file and line.
bad_case() {
  local name=$1 record=$2 expected=$3 status=0
  printf '{"image": "images/train-00000.png", "label": 1}\n%s\n' "$record" > "$work/images/$name.jsonl"
  "$xtrain" train "$work/recipe.yaml" --set data.train="$work/images/$name.jsonl" --set run.dir="$work/$name" \
    > "$work/$name.log" 2>&1 || status=$?
  [[ $status == 2 ]] || { cat "$work/$name.log"; echo "$name exited $status"; exit 1; }
  grep -qF "$work/images/$name.jsonl:2: $expected" "$work/$name.log" || { cat "$work/$name.log"; exit 1; }
}
echo "not a png" > "$work/images/images/broken.png"
bad_case missing '{"image": "images/none.png", "label": 0}' 'image "images/none.png"'
bad_case label '{"image": "images/train-00001.png", "label": 4}' "label 4 is outside the model's 4 labels"
bad_case undecodable '{"image": "images/broken.png", "label": 0}' 'image "images/broken.png"'
# Augmentation keys out of range, or on a family that is not an image classifier: exit 2 naming the key.
refused_key() {
  local key=$1 status=0
  shift
  "$xtrain" validate "$work/recipe.yaml" "$@" > "$work/refused.log" 2>&1 || status=$?
  [[ $status == 2 ]] && grep -q ": $key: " "$work/refused.log" || { cat "$work/refused.log"; echo "$*: exit $status"; exit 1; }
}
refused_key data.crop_scale --set data.crop_scale=[0.5,1.5]
refused_key data.hflip --set data.hflip=2
refused_key data.hflip --set model.family=llama --set model.init_from="" --set data.hflip=0.5
# An image classifier does not generate text: exit 2 with the reason.
status=0
"$xtrain" generate "$work/single/checkpoints/latest" --prompt "once" > "$work/generate.log" 2>&1 || status=$?
[[ $status == 2 ]] || { cat "$work/generate.log"; echo "generate on vit exited $status"; exit 1; }
grep -q "a vit checkpoint is an image classifier, which labels images and does not generate text" "$work/generate.log"
echo "vit: FSDP 2 equals one process; the demo above chance; bad records and generate refused"

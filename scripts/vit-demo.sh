#!/usr/bin/env bash
# The image-classification demo: writes the generated quadrant set (tools/reference/vit_images.py:
# 16x16 pictures, a bright square in one of 4 quadrants, chance 1/4) and a random tiny
# ViTForImageClassification (tools/reference/golden_vit.py) to data/vit-demo, trains
# recipes/vit-demo.yaml (runs/vit-demo; evaluation reports the held-out accuracy), exports it and
# has transformers score the export on the held-out pictures. Extra arguments go to the training.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
python=.venv/bin/python3
if [[ ! -f data/vit-demo/init/model.safetensors ]]; then
  "$python" tools/reference/vit_images.py make --out data/vit-demo --size 16 --train 1024 --eval 256
  "$python" tools/reference/golden_vit.py make --out data/vit-demo/init --image-size 16 --patch-size 4 --labels 4 \
    --hidden 32 --layers 2 --seed 1
fi
build/xtrain train recipes/vit-demo.yaml "$@"
build/xtrain export runs/vit-demo/checkpoints/latest runs/vit-demo/export --overwrite
"$python" tools/reference/vit_images.py accuracy --model runs/vit-demo/export --data data/vit-demo/eval.jsonl

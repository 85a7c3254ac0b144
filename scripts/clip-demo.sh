#!/usr/bin/env bash
# The contrastive image-text demo: writes the generated pairs (tools/reference/clip_pairs.py:
# 16x16 pictures of a coloured shape, captioned "a red circle", 9 captions) and a random tiny
# CLIPModel (tools/reference/golden_clip.py) to data/clip-demo, trains recipes/clip-demo.yaml
# (runs/clip-demo), exports it and has transformers score zero-shot classification of the
# held-out pictures against the 9 captions, the random init's and the trained export's (chance
# 1/9). Extra arguments go to the training.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
python=.venv/bin/python3
if [[ ! -f data/clip-demo/init/model.safetensors ]]; then
  "$python" tools/reference/clip_pairs.py make --out data/clip-demo --size 16 --train 4096 --eval 450 --seed 0
  "$python" tools/reference/golden_clip.py make --out data/clip-demo/init --vocab 257 --eos 256 --positions 24 \
    --image-size 16 --patch-size 4 --hidden 32 --layers 2 --seed 1
fi
echo "random init:"
"$python" tools/reference/clip_pairs.py zero-shot --model data/clip-demo/init --data data/clip-demo/eval.jsonl --seq-len 20
build/xtrain train recipes/clip-demo.yaml "$@"
# xtrain has no evaluation of held-out pairs for clip (data.eval is refused): its own figure is the
# training loss, whose floor is above 0 because a batch of 32 holds several pairs of each caption.
"$python" - runs/clip-demo/metrics.jsonl <<'PY'
import json, sys
losses = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if "loss" in r]
print(f"xtrain training loss: step 1 {losses[0]:.4f}, mean of the last 100 steps {sum(losses[-100:]) / 100:.4f}")
PY
build/xtrain export runs/clip-demo/checkpoints/latest runs/clip-demo/export --overwrite
echo "trained:"
"$python" tools/reference/clip_pairs.py zero-shot --model runs/clip-demo/export --data data/clip-demo/eval.jsonl --seq-len 20

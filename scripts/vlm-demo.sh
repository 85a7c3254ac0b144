#!/usr/bin/env bash
# The vision-language demo, the usual two stages: writes the synthetic shapes set and a random
# LLaVA init (tools/data/make_vlm_demo.py -> data/vlm-demo), trains the projector alone with the
# vision tower and the language model frozen (runs/vlm-demo-align), then the whole model from
# that stage's export (runs/vlm-demo), and scores both stages' captions of the unseen test
# pictures, and of blanked pictures, with `xtrain generate --image` (tools/data/score_vlm_demo.py).
# The scores also go to runs/vlm-demo/scores.jsonl. Extra arguments go to both trainings.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
python=.venv/bin/python3
[[ -f data/vlm-demo/init/model.safetensors ]] || "$python" tools/data/make_vlm_demo.py --out data/vlm-demo
score() {
  for blank in "" --blank; do
    "$python" tools/data/score_vlm_demo.py --xtrain build/xtrain --checkpoint "$1" --data data/vlm-demo $blank \
      --json runs/vlm-demo/scores.jsonl
  done
}
echo "=== stage 1: the projector alone ==="
build/xtrain train recipes/vlm-demo.yaml --set name=vlm-demo-align --set run.dir=runs/vlm-demo-align \
  --set "model.freeze=[vision_tower, language_model]" --set train.steps=300 "$@"
build/xtrain export runs/vlm-demo-align/checkpoints/latest runs/vlm-demo-align/export
echo "=== stage 2: the whole model, from stage 1 ==="
build/xtrain train recipes/vlm-demo.yaml --set model.init_from=hf:runs/vlm-demo-align/export "$@"
mkdir -p runs/vlm-demo && rm -f runs/vlm-demo/scores.jsonl
echo "=== captions of unseen pictures, after stage 1 and after stage 2 ==="
score runs/vlm-demo-align/checkpoints/latest
score runs/vlm-demo/checkpoints/latest
echo
echo "=== one answer ==="
picture=data/vlm-demo/$(head -1 data/vlm-demo/test.tsv | cut -f1)
echo "$picture: $(head -1 data/vlm-demo/test.tsv | cut -f2- | tr '\t' ' ')"
build/xtrain generate runs/vlm-demo/checkpoints/latest --chat --prompt "What is in the picture?" \
  --image "$picture" --temperature 0

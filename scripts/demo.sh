#!/usr/bin/env bash
# Trains the demo model on the built-in corpus, then shows it generating text.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build/xtrain train recipes/demo.yaml "$@"
build/xtrain eval recipes/demo.yaml "$@"
echo
echo "=== sample from runs/demo/checkpoints/latest ==="
build/xtrain generate runs/demo/checkpoints/latest --prompt "Once upon a time" --max-new-tokens 400 --temperature 0.8 --top-k 20 --seed 1

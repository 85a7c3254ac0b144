#!/usr/bin/env bash
# SentencePiece parity: trains a unigram and a BPE model with Python's sentencepiece on a
# multilingual text, and checks that `xtrain tokenize` gives exactly the ids Python's
# encode(text) gives. Also: the recipe takes the model and sizes the vocabulary from it, and a
# file that is not a model is bad input (exit 2). Fails when the Python ($XTRAIN_PYTHON, else
# .venv/bin/python3) has no sentencepiece.
set -euo pipefail
xtrain=$1
source_dir=$2
python=${XTRAIN_PYTHON:-$source_dir/.venv/bin/python3}
tools=$source_dir/tools/data
if ! "$python" -c "import sentencepiece" 2> /dev/null; then
  echo "error: $python cannot import sentencepiece, the reference implementation" >&2
  echo "  (scripts/setup-deps.sh installs it from requirements/python.txt)" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$python" "$tools/make_tokenizer_text.py" --size 120000 > "$work/text.txt"
for model_type in unigram bpe; do
  "$python" - "$work" "$model_type" 2> "$work/train.log" <<'PY' || { cat "$work/train.log"; exit 1; }
import sys
import sentencepiece as spm

work, model_type = sys.argv[1:]
spm.SentencePieceTrainer.train(input=f"{work}/text.txt", model_prefix=f"{work}/{model_type}", vocab_size=1500,
                               model_type=model_type, character_coverage=1.0, byte_fallback=True,
                               hard_vocab_limit=False)
PY
  "$python" "$tools/reference_token_ids.py" sentencepiece "$work/$model_type.model" "$work/text.txt" \
    "$work/$model_type.expected"
  "$xtrain" tokenize --tokenizer "sentencepiece:$work/$model_type.model" --input "$work/text.txt" > "$work/$model_type.ids"
  "$python" "$tools/compare_token_ids.py" "sentencepiece $model_type" \
    "$work/$model_type.expected" "$work/$model_type.ids"
done

printf 'name: spm\ndata:\n  tokenizer: sentencepiece:%s\n' "$work/bpe.model" > "$work/recipe.yaml"
"$xtrain" validate "$work/recipe.yaml" | grep -q "vocab_size: 1500"

echo "not a model" > "$work/broken.model"
set +e
"$xtrain" tokenize --tokenizer "sentencepiece:$work/broken.model" < /dev/null > /dev/null 2> "$work/error.txt"
status=$?
set -e
[[ $status -eq 2 ]]
grep -q "broken.model: not a SentencePiece model" "$work/error.txt"
echo "sentencepiece parity: ok"

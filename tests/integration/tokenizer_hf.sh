#!/usr/bin/env bash
# Hugging Face tokenizer.json parity: trains four small byte-level BPE tokenizer.json files with
# Python's tokenizers (the library's Python binding) in the styles of GPT-2, Llama 3, Qwen2 and
# a mix of every Split behavior (tools/data/train_hf_bpe.py), and checks that `xtrain tokenize`
# gives exactly the library's ids on a varied multilingual text of 120 KB with special tokens
# in it. Then trains a tiny model with one of them. Fails when the Python ($XTRAIN_PYTHON, else
# .venv/bin/python3) has no tokenizers.
set -euo pipefail
xtrain=$1
source_dir=$2
python=${XTRAIN_PYTHON:-$source_dir/.venv/bin/python3}
tools=$source_dir/tools/data
if ! "$python" -c "import tokenizers" 2> /dev/null; then
  echo "error: $python cannot import tokenizers, the reference implementation" >&2
  echo "  (scripts/setup-deps.sh installs it from requirements/python.txt)" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$python" "$tools/make_tokenizer_text.py" --size 120000 > "$work/text.txt"
"$python" "$tools/train_hf_bpe.py" "$work/text.txt" "$work/tokenizers"

for style in gpt2 llama3 qwen2 mixed; do
  file=$work/tokenizers/$style.json
  "$python" "$tools/reference_token_ids.py" hf "$file" "$work/text.txt" "$work/$style.expected"
  "$xtrain" tokenize --tokenizer "hf:$file" --input "$work/text.txt" > "$work/$style.ids"
  "$python" "$tools/compare_token_ids.py" "hf $style" "$work/$style.expected" "$work/$style.ids"
done

# A folder holding tokenizer.json works too, and the recipe takes it: 1256 tokens + 4 added.
mkdir "$work/folder"
cp "$work/tokenizers/llama3.json" "$work/folder/tokenizer.json"
printf 'name: hf\ndata:\n  tokenizer: hf:%s\n' "$work/folder" > "$work/recipe.yaml"
"$xtrain" validate "$work/recipe.yaml" | grep -q "vocab_size: 1260"

# Train a tiny model with it; generate finds the tokenizer through the checkpoint's recipe, and
# refuses to fall back to bytes once the file is gone.
cat >> "$work/recipe.yaml" <<YAML
  seq_len: 32
run:
  dir: $work/run
model:
  hidden_size: 32
  num_layers: 1
  num_heads: 2
train:
  steps: 2
  global_batch_size: 2
  micro_batch_size: 2
  threads: 1
YAML
"$xtrain" train "$work/recipe.yaml" > "$work/train.log"
grep -q "done: 2 steps" "$work/train.log"
"$xtrain" generate "$work/run/checkpoints/latest" --prompt "Once upon" --max-new-tokens 4 > /dev/null
mv "$work/folder" "$work/moved"
set +e
"$xtrain" generate "$work/run/checkpoints/latest" --prompt "Once" > /dev/null 2> "$work/error.txt"
status=$?
set -e
[[ $status -eq 2 ]]
grep -q "data.tokenizer: cannot read" "$work/error.txt"

echo '{"model": {"type": "BPE", "vocab": {' > "$work/broken.json"
set +e
"$xtrain" tokenize --tokenizer "hf:$work/broken.json" < /dev/null > /dev/null 2> "$work/error.txt"
status=$?
set -e
[[ $status -eq 2 ]]
grep -q "broken.json: not valid JSON" "$work/error.txt"
echo "hf parity: ok"

#!/usr/bin/env bash
# Hugging Face WordPiece parity: trains two small BERT-style tokenizer.json files with Python's
# tokenizers (tools/data/train_hf_wordpiece.py: uncased with accents stripped, and cased) and
# checks that `xtrain tokenize` gives exactly the library's ids (encode without special tokens)
# on a varied multilingual text of 120 KB followed by BERT's hard cases (special tokens in the
# text, control characters, combining marks, the CJK ranges' edges, words over 100
# characters), and on a sweep of every code point of planes 0-3 ("x" + C + "x"), where each
# character's class shows. A recipe then takes the file and reports its vocabulary. Fails
# when the Python ($XTRAIN_PYTHON, else .venv/bin/python3) has no tokenizers.
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

"$python" "$tools/make_tokenizer_text.py" --size 120000 --bert-cases > "$work/text.txt"
"$python" "$tools/make_tokenizer_text.py" --code-point-sweep > "$work/sweep.txt"
"$python" "$tools/train_hf_wordpiece.py" "$work/text.txt" "$work/tokenizers"

for style in uncased cased; do
  file=$work/tokenizers/$style.json
  for text in text sweep; do
    "$python" "$tools/reference_token_ids.py" hf "$file" "$work/$text.txt" "$work/$style.$text.expected"
    "$xtrain" tokenize --tokenizer "hf:$file" --input "$work/$text.txt" > "$work/$style.$text.ids"
    "$python" "$tools/compare_token_ids.py" "wordpiece $style $text" "$work/$style.$text.expected" "$work/$style.$text.ids"
  done
done

# A recipe takes a folder holding the file: 1500 tokens, the 5 special ones among them.
mkdir "$work/folder"
cp "$work/tokenizers/uncased.json" "$work/folder/tokenizer.json"
printf 'name: wordpiece\ndata:\n  tokenizer: hf:%s\n' "$work/folder" > "$work/recipe.yaml"
"$xtrain" validate "$work/recipe.yaml" | grep -q "vocab_size: 1500"

# A normalizer the reader does not know is bad input naming the file and the type.
"$python" - "$work/tokenizers/uncased.json" "$work/unsupported.json" <<'PY'
import json, sys
tokenizer = json.load(open(sys.argv[1], encoding="utf-8"))
tokenizer["normalizer"] = {"type": "Precompiled", "precompiled_charsmap": ""}
json.dump(tokenizer, open(sys.argv[2], "w", encoding="utf-8"))
PY
set +e
"$xtrain" tokenize --tokenizer "hf:$work/unsupported.json" < /dev/null > /dev/null 2> "$work/error.txt"
status=$?
set -e
[[ $status -eq 2 ]]
grep -q "unsupported.json: normalizer: unsupported normalizer type 'Precompiled'" "$work/error.txt"
echo "wordpiece parity: ok"

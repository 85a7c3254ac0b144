#!/usr/bin/env bash
# tiktoken parity: builds the gpt2, cl100k_base and o200k_base encodings offline with Python's
# tiktoken from the published rank files in data/tiktoken (checked by sha256), and checks that
# `xtrain tokenize` gives exactly tiktoken's ids (encode_ordinary) on a varied multilingual text
# of 120 KB. Fails when the Python ($XTRAIN_PYTHON, else .venv/bin/python3) has no tiktoken.
set -euo pipefail
xtrain=$1
source_dir=$2
python=${XTRAIN_PYTHON:-$source_dir/.venv/bin/python3}
tools=$source_dir/tools/data
ranks=$source_dir/data/tiktoken
if ! "$python" -c "import tiktoken" 2> /dev/null; then
  echo "error: $python cannot import tiktoken, the reference implementation" >&2
  echo "  (scripts/setup-deps.sh installs it from requirements/python.txt)" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# gpt2.tiktoken holds the GPT-2 ranks (published as r50k_base.tiktoken).
declare -A sha256=(
  [gpt2]=306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930
  [cl100k_base]=223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7
  [o200k_base]=446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d
)
for encoding in gpt2 cl100k_base o200k_base; do
  file=$ranks/$encoding.tiktoken
  actual=$(sha256sum "$file" | cut -d' ' -f1)
  if [[ $actual != "${sha256[$encoding]}" ]]; then
    echo "error: $file: sha256 $actual, expected ${sha256[$encoding]}" >&2
    exit 1
  fi
done
"$python" "$tools/make_tokenizer_text.py" --size 120000 > "$work/text.txt"

for encoding in gpt2 cl100k_base o200k_base; do
  file=$ranks/$encoding.tiktoken
  "$python" "$tools/reference_token_ids.py" tiktoken "$encoding" "$file" "$work/text.txt" "$work/$encoding.expected"
  "$xtrain" tokenize --tokenizer "tiktoken:$file" --input "$work/text.txt" > "$work/$encoding.ids"
  "$python" "$tools/compare_token_ids.py" "tiktoken $encoding" "$work/$encoding.expected" "$work/$encoding.ids"
done

# The encoding can be named when the file name does not tell it.
cp "$ranks/cl100k_base.tiktoken" "$work/ranks.txt"
"$xtrain" tokenize --tokenizer "tiktoken:$work/ranks.txt:cl100k_base" --input "$work/text.txt" > "$work/named.ids"
cmp "$work/named.ids" "$work/cl100k_base.ids"
set +e
"$xtrain" tokenize --tokenizer "tiktoken:$work/ranks.txt" < /dev/null > /dev/null 2> "$work/error.txt"
status=$?
set -e
[[ $status -eq 2 ]]
grep -q "cannot tell the encoding of tiktoken rank file" "$work/error.txt"

printf 'name: tiktoken\ndata:\n  tokenizer: tiktoken:%s\n' "$ranks/o200k_base.tiktoken" > "$work/recipe.yaml"
"$xtrain" validate "$work/recipe.yaml" | grep -q "vocab_size: 200019"
echo "tiktoken parity: ok"

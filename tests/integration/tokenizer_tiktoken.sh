#!/usr/bin/env bash
# tiktoken parity: installs js-tiktoken from npm, exports the gpt2, cl100k_base and o200k_base
# ranks it ships as .tiktoken rank files, and checks that `xtrain tokenize` gives exactly
# js-tiktoken's ids (encode_ordinary) on a varied multilingual text of 120 KB. Skips (77)
# when npm cannot install the package.
set -euo pipefail
xtrain=$1
source_dir=$2
python=/usr/bin/python3
tools=$source_dir/tools/data
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "skip: node and npm are needed for the reference tokenizer (scripts/setup-deps.sh installs them)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! timeout 600 npm install --prefix "$work/npm" --no-audit --no-fund js-tiktoken@1 > "$work/npm.log" 2>&1; then
  tail -5 "$work/npm.log"
  echo "skip: npm could not install js-tiktoken (no access to the npm registry?)"
  exit 77
fi
modules=$work/npm/node_modules
node "$tools/export_tiktoken_ranks.js" "$modules" "$work/ranks" gpt2 cl100k_base o200k_base
"$python" "$tools/make_tokenizer_text.py" --size 120000 > "$work/text.txt"

for encoding in gpt2 cl100k_base o200k_base; do
  node "$tools/reference_token_ids.js" tiktoken "$modules" "$encoding" "$work/text.txt" "$work/$encoding.expected"
  "$xtrain" tokenize --tokenizer "tiktoken:$work/ranks/$encoding.tiktoken" --input "$work/text.txt" \
    > "$work/$encoding.ids"
  "$python" "$tools/compare_token_ids.py" "tiktoken $encoding" "$work/$encoding.expected" "$work/$encoding.ids"
done

# The encoding can be named when the file name does not tell it.
cp "$work/ranks/cl100k_base.tiktoken" "$work/ranks.txt"
"$xtrain" tokenize --tokenizer "tiktoken:$work/ranks.txt:cl100k_base" --input "$work/text.txt" > "$work/named.ids"
cmp "$work/named.ids" "$work/cl100k_base.ids"
set +e
"$xtrain" tokenize --tokenizer "tiktoken:$work/ranks.txt" < /dev/null > /dev/null 2> "$work/error.txt"
status=$?
set -e
[[ $status -eq 2 ]]
grep -q "cannot tell the encoding of tiktoken rank file" "$work/error.txt"

printf 'name: tiktoken\ndata:\n  tokenizer: tiktoken:%s\n' "$work/ranks/o200k_base.tiktoken" > "$work/recipe.yaml"
"$xtrain" validate "$work/recipe.yaml" | grep -q "vocab_size: 200019"
echo "tiktoken parity: ok"

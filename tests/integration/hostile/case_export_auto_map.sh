#!/usr/bin/env bash
# A run whose Hugging Face tokenizer folder names remote code (tokenizer_config.json's auto_map,
# custom_pipelines and trust_remote_code, nested too) exports without them, with a note; a JSON
# file without them (tokenizer.json) is copied byte for byte, and the source folder is unchanged.
source "$(dirname "$0")/lib.sh"
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
"$python" "$srcdir/tools/data/make_tokenizer_text.py" --size 20000 > "$work/text.txt"
"$python" "$srcdir/tools/data/train_hf_bpe.py" "$work/text.txt" "$work/tokenizers" > /dev/null
mkdir "$work/tok"
cp "$work/tokenizers/gpt2.json" "$work/tok/tokenizer.json"
cat > "$work/tok/tokenizer_config.json" <<'JSON'
{"model_max_length": 64, "auto_map": {"AutoTokenizer": ["evil.EvilTokenizer", null]},
 "custom_pipelines": {"x": {"impl": "evil.Pipe"}}, "extra": {"trust_remote_code": true, "keep": 1},
 "tokenizer_class": "PreTrainedTokenizerFast"}
JSON
guard_neighbours "$work/tok"
write_recipe "$work/recipe.yaml" 2
sed -i "s|^data:|data:\n  tokenizer: hf:$work/tok|" "$work/recipe.yaml"
train run 1 --set optim.warmup_steps=1
expect_exit 0 "$work/export.log" "$xtrain" export "$work/run/checkpoints/latest" "$work/out"
expect_text "$work/export.log" "note: tokenizer_config.json: dropped auto_map, custom_pipelines, trust_remote_code"
! grep -rlE '"(auto_map|custom_pipelines|trust_remote_code)"' "$work/out" || fail "a code reference was exported"
grep -q '"keep": 1' "$work/out/tokenizer_config.json" || fail "tokenizer_config.json lost its other keys"
cmp "$work/tok/tokenizer.json" "$work/out/tokenizer.json" || fail "tokenizer.json was not copied as it is"
check_neighbours "$work/tok"
echo "export drops code references from its JSON files"

# The tokenizer files a recipe names, with hostile ids and types: an added token on another token's
# id, an id beyond int64, a tokenizer_config.json whose eos_token is a number or which is not an
# object, tiktoken ranks with a gap of 16 million, a rank or a token given twice. Each is refused
# by validate (exit 2) naming the file and what is wrong, without sizing a vocabulary by it.
source "$(dirname "$0")/lib.sh"
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
echo "hello world, some text to train on" > "$work/data.txt"
# The files: a byte-level BPE tokenizer.json (the 256 bytes, <|endoftext|> added at 256) in
# folders with one thing changed each, and gpt2-style rank files.
"$python" - "$work" <<'PY'
import base64, copy, json, os, sys
work = sys.argv[1]
printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
spelling, extra = {}, 0
for b in range(256):  # GPT-2's byte-level alphabet
    if b in printable:
        spelling[b] = chr(b)
    else:
        spelling[b] = chr(256 + extra)
        extra += 1
good = {"version": "1.0", "normalizer": None, "post_processor": None, "decoder": {"type": "ByteLevel"},
        "added_tokens": [{"id": 256, "content": "<|endoftext|>", "special": True, "normalized": False}],
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
        "model": {"type": "BPE", "vocab": {spelling[b]: b for b in range(256)}, "merges": []}}
def folder(name, tokenizer, config=None):
    os.makedirs(f"{work}/{name}")
    json.dump(tokenizer, open(f"{work}/{name}/tokenizer.json", "w"))
    if config is not None:
        open(f"{work}/{name}/tokenizer_config.json", "w").write(config)
folder("good", good, '{"eos_token": "<|endoftext|>"}')
taken = copy.deepcopy(good); taken["added_tokens"][0]["id"] = 65
folder("taken", taken)
beyond = copy.deepcopy(good); beyond["added_tokens"][0]["id"] = 2**64 - 1
folder("beyond", beyond)
folder("eos_number", good, '{"eos_token": 5}')
folder("config_list", good, '[1, 2]')
lines = [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256)]
def ranks(name, extra):
    open(f"{work}/{name}.tiktoken", "w").write("\n".join(lines + extra) + "\n")
ranks("ranks_good", ["IHQ= 256"])             # " t"
ranks("ranks_gap", ["IHQ= 16777215"])
ranks("ranks_twice", ["IHQ= 5"])
ranks("token_twice", ["IHQ= 256", "IHQ= 257"])
PY
# validate_with NAME TOKENIZER: validates a tiny recipe whose data.tokenizer is TOKENIZER, into NAME.log.
validate_with() {
  cat > "$work/$1.yaml" <<YAML
name: $1
model: {hidden_size: 64, num_layers: 1, num_heads: 4}
data: {train: $work/data.txt, seq_len: 16, tokenizer: "$2"}
train: {steps: 1, global_batch_size: 2, micro_batch_size: 2}
YAML
  timeout 20 "$xtrain" validate "$work/$1.yaml"
}
refused() {
  expect_refusal 2 "$work/$1.log" "$3" validate_with "$1" "$2"
  echo "$1: $(head -c 300 "$work/$1.log")"
}

refused taken "hf:$work/taken" \
  "$work/taken/tokenizer.json: added_tokens: '<|endoftext|>' has id 65, which the vocab gives to 'A'; give the added token an id of its own"
refused beyond "hf:$work/beyond" \
  "$work/beyond/tokenizer.json: added_tokens: '<|endoftext|>' has id 18446744073709551615, outside 0-16777215"
refused eos_number "hf:$work/eos_number" \
  "$work/eos_number/tokenizer_config.json: eos_token is 5; it must be the text of the token that ends a document"
refused config_list "hf:$work/config_list" \
  "$work/config_list/tokenizer_config.json: a tokenizer_config.json is a JSON object (eos_token, ...), got [1,2]"
refused ranks_gap "tiktoken:$work/ranks_gap.tiktoken:gpt2" \
  "$work/ranks_gap.tiktoken:257: rank 16777215 is beyond the 258 lines of the file: the ranks of a rank file run from 0 without gaps"
refused ranks_twice "tiktoken:$work/ranks_twice.tiktoken:gpt2" \
  "$work/ranks_twice.tiktoken:257: rank 5 is given again (first on line 6)"
refused token_twice "tiktoken:$work/token_twice.tiktoken:gpt2" \
  "$work/token_twice.tiktoken:258: the token \`IHQ=\` is ranked again (first on line 257)"

# The same files without the fault are taken.
expect_exit 0 "$work/good.log" validate_with good "hf:$work/good"
expect_line "$work/good.log" "  vocab_size: 257"
expect_exit 0 "$work/ranks_good.log" validate_with ranks_good "tiktoken:$work/ranks_good.tiktoken:gpt2"

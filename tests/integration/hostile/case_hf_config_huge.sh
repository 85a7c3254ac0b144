# model.init_from hf:DIR whose config.json gives a million layers (or another value outside the
# recipe's range for its key) is refused by validate and by plan within 2 s, exit 2, naming
# config.json, its field and the recipe key, before any model or layer list is built.
source "$(dirname "$0")/lib.sh"
echo "some text to train on" > "$work/data.txt"
# hf_folder NAME FIELDS: a llama folder (config.json only) whose fields FIELDS override the tiny shape.
hf_folder() {
  mkdir -p "$work/$1"
  cat > "$work/$1/config.json" <<JSON
{"model_type": "${3:-llama}", "vocab_size": 300, "hidden_size": 64, "intermediate_size": 128,
 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 128,
 "num_local_experts": 4, "num_experts_per_tok": 2, $2}
JSON
  cat > "$work/$1.yaml" <<YAML
name: $1
model:
  init_from: hf:$work/$1
data:
  train: $work/data.txt
  seq_len: 64
train:
  steps: 1
  global_batch_size: 2
  micro_batch_size: 2
YAML
}
# refused_quickly LOG TEXT command...: exit 2 with TEXT, in under $limit_ms ms (stopped after 20 s).
limit_ms=2000
refused_quickly() {
  local log=$1 text=$2 start
  shift 2
  start=$(date +%s%N)
  expect_refusal 2 "$log" "$text" timeout 20 "$@"
  local ms=$((($(date +%s%N) - start) / 1000000))
  ((ms < limit_ms)) || fail "$* took $ms ms to refuse"
  echo "$(basename "$log"): refused in $ms ms: $(head -c 300 "$log")"
}

hf_folder million '"num_hidden_layers": 1000000'
refused_quickly "$work/validate.log" \
  "$work/million/config.json: num_hidden_layers (model.num_layers): must be between 1 and 4096, got 1000000" \
  "$xtrain" validate "$work/million.yaml"
expect_text "$work/validate.log" "correct config.json"
refused_quickly "$work/plan.log" \
  "$work/million/config.json: num_hidden_layers (model.num_layers): must be between 1 and 4096, got 1000000" \
  "$xtrain" plan "$work/million.yaml" --nodes 1 --gpus-per-node 8 --hardware h100-sxm

# The other values are refused as fast; the bound leaves room for a loaded machine.
limit_ms=10000
# Below the range, beyond int64, not an integer, positions that would size a rotary table of 10^12
# rows, and gpt_oss's default layer_types list of 10^12 names.
hf_folder negative '"num_hidden_layers": -3'
refused_quickly "$work/negative.log" "num_hidden_layers (model.num_layers): must be between 1 and 4096, got -3" \
  "$xtrain" validate "$work/negative.yaml"
hf_folder overflow '"num_hidden_layers": 18446744073709551615'
refused_quickly "$work/overflow.log" \
  "overflow/config.json: field \"num_hidden_layers\" is 18446744073709551615, beyond any size or id" \
  "$xtrain" validate "$work/overflow.yaml"
hf_folder fraction '"num_hidden_layers": 2.5'
refused_quickly "$work/fraction.log" "fraction/config.json: field \"num_hidden_layers\" must be an integer, got 2.5" \
  "$xtrain" validate "$work/fraction.yaml"
hf_folder positions '"num_hidden_layers": 2, "max_position_embeddings": 1000000000000'
refused_quickly "$work/positions.log" \
  "positions/config.json: max_position_embeddings (model.max_seq_len): must be between 0 and 16777216, got 1000000000000" \
  "$xtrain" plan "$work/positions.yaml" --nodes 1 --gpus-per-node 1 --hardware h100-sxm
hf_folder gpt_oss '"num_hidden_layers": 1000000000000' gpt_oss
refused_quickly "$work/gpt_oss.log" "gpt_oss/config.json: field \"num_hidden_layers\" is 1000000000000" \
  "$xtrain" validate "$work/gpt_oss.yaml"
hf_folder wrong_type '"num_hidden_layers": 2, "tie_word_embeddings": "yes"'
refused_quickly "$work/wrong_type.log" "wrong_type/config.json: field \"tie_word_embeddings\" must be true or false" \
  "$xtrain" validate "$work/wrong_type.yaml"

# bert: a padding id beyond the vocabulary, and segment embeddings of 10^11 rows.
hf_folder bert_pad '"num_hidden_layers": 2, "pad_token_id": 100000' bert
sed -i 's/seq_len: 64/seq_len: 64\n  objective: mlm/' "$work/bert_pad.yaml"
refused_quickly "$work/bert_pad.log" \
  "model.pad_token_id: 100000 is not an id of the vocabulary of 300 (model.vocab_size); it comes from $work/bert_pad/config.json" \
  "$xtrain" validate "$work/bert_pad.yaml"
hf_folder bert_types '"num_hidden_layers": 2, "type_vocab_size": 100000000000' bert
sed -i 's/seq_len: 64/seq_len: 64\n  objective: mlm/' "$work/bert_types.yaml"
refused_quickly "$work/bert_types.log" \
  "bert_types/config.json: type_vocab_size (model.vocab_size): must be between 0 and 16777216, got 100000000000" \
  "$xtrain" validate "$work/bert_types.yaml"

# llava: a vision tower of a million layers (checked as model.num_layers), images of 10^10 pixels a side.
llava_folder() {
  hf_folder "$1" '"num_hidden_layers": 2'
  cat > "$work/$1/config.json" <<JSON
{"model_type": "llava", "image_token_index": 299,
 "text_config": {"model_type": "llama", "vocab_size": 300, "hidden_size": 64, "intermediate_size": 128,
                 "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128},
 "vision_config": {"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 2, "patch_size": 16, $2}}
JSON
}
llava_folder tower '"num_hidden_layers": 1000000, "image_size": 32'
refused_quickly "$work/tower.log" \
  "tower/config.json: vision_config.num_hidden_layers (model.num_layers): must be between 1 and 4096, got 1000000" \
  "$xtrain" validate "$work/tower.yaml"
llava_folder pixels '"num_hidden_layers": 2, "image_size": 10000000000'
refused_quickly "$work/pixels.log" "pixels/config.json vision_config: image_size 10000000000 is more than 16384 pixels a side" \
  "$xtrain" validate "$work/pixels.yaml"

# A config.json of 20 MB (a list of ten million numbers) is refused before it is parsed.
hf_folder bulky '"num_hidden_layers": 2'
{ printf '{"model_type": "llama", "padding": ['; { yes 0, || true; } | head -n 10000000 | tr -d '\n'; printf '0]}'; } \
  > "$work/bulky/config.json"
refused_quickly "$work/bulky.log" "bulky/config.json: the file is 20.0 MB; a config.json holds the model's settings" \
  "$xtrain" validate "$work/bulky.yaml"

# The folder's shape within every range is taken as before.
hf_folder fine '"num_hidden_layers": 2'
expect_exit 0 "$work/fine.log" "$xtrain" validate "$work/fine.yaml"
expect_line "$work/fine.log" "  num_layers: 2"

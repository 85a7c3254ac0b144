# A config.json with both rope_parameters (yarn) and rope_scaling (dynamic): transformers takes
# rope_scaling, so a model read from rope_parameters would compute other logits. Two that differ
# are refused (exit 2) naming both keys; two that give the same rotary embedding are accepted.
source "$(dirname "$0")/lib.sh"
echo "some text to train on" > "$work/data.txt"
# hf_folder NAME ROPE_FIELDS: a tiny llama folder (config.json only) with the rope fields given.
hf_folder() {
  mkdir -p "$work/$1"
  cat > "$work/$1/config.json" <<JSON
{"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 300, "hidden_size": 64,
 "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
 "max_position_embeddings": 256, "rms_norm_eps": 1e-5, $2}
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
yarn='{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "rope_theta": 10000.0}'
hf_folder both "\"rope_parameters\": $yarn, \"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 2.0}"
expect_refusal 2 "$work/both.log" "$work/both/config.json: rope_parameters" "$xtrain" validate "$work/both.yaml"
expect_text "$work/both.log" "and rope_scaling {\"factor\":2.0,\"rope_type\":\"dynamic\"} give different rotary embeddings"
expect_text "$work/both.log" "keep one of the two keys in config.json"
# Two supported scalings that differ (yarn against llama3) are refused alike.
hf_folder two_kinds "\"rope_parameters\": $yarn, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 4.0,
 \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 64}"
expect_refusal 2 "$work/two_kinds.log" "give different rotary embeddings" "$xtrain" validate "$work/two_kinds.yaml"

# The same yarn scaling under both keys (rope_theta beside it, as transformers 4 wrote it): accepted.
hf_folder agree "\"rope_parameters\": $yarn, \"rope_theta\": 10000.0,
 \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0, \"original_max_position_embeddings\": 64}"
expect_exit 0 "$work/agree.log" "$xtrain" validate "$work/agree.yaml"
expect_line "$work/agree.log" "  rope_scaling_type: yarn"
expect_line "$work/agree.log" "  rope_scaling_factor: 4.0"
# An empty rope_parameters is no rope at all: rope_scaling stands, as in transformers.
hf_folder empty "\"rope_parameters\": {}, \"rope_scaling\": $yarn"
expect_exit 0 "$work/empty.log" "$xtrain" validate "$work/empty.yaml"
expect_line "$work/empty.log" "  rope_scaling_type: yarn"

# What transformers reads from the refused folder: rope_scaling's dynamic scaling.
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
if [[ -x $python ]] && "$python" -c 'import transformers' 2> /dev/null; then
  "$python" - "$work/both" <<'PY' > "$work/transformers.log" 2>&1 || { cat "$work/transformers.log"; fail "transformers read rope_parameters"; }
import sys, warnings
warnings.simplefilter("ignore")
from transformers import AutoConfig
rope = AutoConfig.from_pretrained(sys.argv[1]).rope_parameters
assert rope["rope_type"] == "dynamic", rope
print("transformers reads", rope)
PY
  cat "$work/transformers.log"
fi

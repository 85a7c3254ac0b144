#!/usr/bin/env bash
# The Hugging Face round trip keeps what it read. A Qwen3-MoE folder that save_pretrained wrote
# with router_aux_loss_coef 0.001 and its own bos, eos and pad token ids, imported with
# model.init_from, trained 2 steps and exported: the exported config.json has the same
# coefficient digit for digit (xtrain trained with 0.001 x top k), the same token ids, and the
# folder's tokenizer files and generation_config.json unchanged; transformers reads it so. A BERT
# folder with hidden_dropout_prob 0.1: its dropout taken (bert computes dropout; the log says
# so), a probability of 1 refused (exit 2), accepted with model.dropout 0 (the log says so once),
# trained 2 steps and exported with its dropout as it was. Prints the values it checks. Fails when the Python ($XTRAIN_PYTHON, else
# .venv/bin/python3) has no transformers.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
source "$srcdir/tests/integration/lib/expect.sh"
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work

"$python" "$srcdir/tools/data/make_tokenizer_text.py" --size 20000 > "$work/text.txt"
"$python" "$srcdir/tools/data/train_hf_bpe.py" "$work/text.txt" "$work/tokenizers" 200 > /dev/null
# The two folders, as transformers writes them, each with its tokenizer and its special tokens.
"$python" - "$work" "$srcdir/data/tokenizers/bert-demo.json" <<'PY'
import json, os, shutil, sys
import torch, transformers
from tokenizers import Tokenizer
transformers.utils.logging.disable_progress_bar()
work, bert_tokenizer = sys.argv[1], sys.argv[2]

def with_tokenizer(out, source, special):
    shutil.copy(source, os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", **special}, f, indent=2)
    with open(os.path.join(out, "special_tokens_map.json"), "w") as f:
        json.dump(special, f, indent=2)

torch.manual_seed(5)
tokenizer = Tokenizer.from_file(f"{work}/tokenizers/qwen2.json")
ids = {name: tokenizer.token_to_id(f"<|{name}|>") for name in ("endoftext", "im_start", "im_end")}
config = transformers.Qwen3MoeConfig(
    vocab_size=tokenizer.get_vocab_size(with_added_tokens=True) + 4, hidden_size=32, intermediate_size=64,
    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64,
    num_experts=4, num_experts_per_tok=2, moe_intermediate_size=24, mlp_only_layers=[0],
    router_aux_loss_coef=0.001, bos_token_id=ids["im_start"], eos_token_id=ids["im_end"],
    pad_token_id=ids["endoftext"])
transformers.Qwen3MoeForCausalLM(config).float().save_pretrained(f"{work}/qwen3_moe")
with_tokenizer(f"{work}/qwen3_moe", f"{work}/tokenizers/qwen2.json",
               {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"})

vocab = Tokenizer.from_file(bert_tokenizer).get_vocab_size(with_added_tokens=True)
config = transformers.BertConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.1,
                                 attention_probs_dropout_prob=0.1, pad_token_id=0)
transformers.BertForMaskedLM(config).float().save_pretrained(f"{work}/bert")
with_tokenizer(f"{work}/bert", bert_tokenizer, {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                                                "cls_token": "[CLS]", "mask_token": "[MASK]"})
PY
"$python" - "$work" <<'PY'
import json, sys
work = sys.argv[1]
text = open(f"{work}/text.txt", encoding="utf-8").read()
with open(f"{work}/train.jsonl", "w", encoding="utf-8") as f:
    for i in range(0, len(text), 300):
        f.write(json.dumps({"text": text[i:i + 300]}, ensure_ascii=False) + "\n")
PY

# --- Qwen3-MoE: router_aux_loss_coef and the token ids --------------------------------------
cat > "$work/recipe.yaml" <<YAML
name: hf-round-trip
model:
  init_from: hf:$work/qwen3_moe
data:
  train: $work/train.jsonl
  seq_len: 32
train:
  steps: 2
  global_batch_size: 4
  micro_batch_size: 2
  log_every: 1
  threads: 1
optim:
  lr: 1.0e-3
  warmup_steps: 0
checkpoint:
  every: 2
YAML
"$xtrain" validate "$work/recipe.yaml" > "$work/moe.yaml"
grep -q "^  router_aux_loss_coef: 0.002$" "$work/moe.yaml" || { cat "$work/moe.yaml"; exit 1; }
train moe 1
"$xtrain" export "$work/moe/checkpoints/latest" "$work/moe_export" > /dev/null
for file in tokenizer.json tokenizer_config.json special_tokens_map.json generation_config.json; do
  cmp "$work/qwen3_moe/$file" "$work/moe_export/$file"
done
"$python" - "$work" <<'PY'
import json, sys
import transformers
work = sys.argv[1]
fields = ("router_aux_loss_coef", "bos_token_id", "eos_token_id", "pad_token_id", "output_router_logits")
imported = json.load(open(f"{work}/qwen3_moe/config.json"))
exported = json.load(open(f"{work}/moe_export/config.json"))
text = open(f"{work}/moe_export/config.json").read()
aux = [json.loads(line) for line in open(f"{work}/moe/metrics.jsonl") if '"loss"' in line]
print("qwen3_moe imported config.json:", {k: imported[k] for k in fields})
print("qwen3_moe exported config.json:", {k: exported[k] for k in fields})
print("qwen3_moe trained with xtrain's coefficient 0.002 (0.001 x top k 2): aux_loss.load_balancing "
      "(coefficient x loss, the loss 1 when balanced) per step:",
      [r.get("aux_loss.load_balancing") for r in aux])
assert '"router_aux_loss_coef": 0.001,' in text, "the coefficient is not written as imported"
for k in fields:
    assert exported[k] == imported[k], (k, exported[k], imported[k])
assert all(r.get("aux_loss.load_balancing") is not None for r in aux), aux
config = transformers.AutoConfig.from_pretrained(f"{work}/moe_export")
print("transformers reads the export:", {k: getattr(config, k) for k in fields})
assert config.router_aux_loss_coef == 0.001 and config.pad_token_id == imported["pad_token_id"]
PY

# --- BERT with dropout: taken, or overridden by model.dropout 0 -----------------------------
cat > "$work/bert.yaml" <<YAML
name: hf-round-trip-bert
model:
  init_from: hf:$work/bert
data:
  train: builtin:demo
  objective: mlm
  seq_len: 32
train:
  steps: 2
  global_batch_size: 4
  micro_batch_size: 2
  log_every: 1
  threads: 1
optim:
  lr: 1.0e-3
  warmup_steps: 0
checkpoint:
  every: 2
YAML
"$xtrain" train "$work/bert.yaml" --set run.dir="$work/bert_dropout" --stop-at-step 1 > "$work/taken.log" 2>&1 || {
  cat "$work/taken.log"
  exit 1
}
expect_line "$work/taken.log" "model: dropout 0.1 (keyed masks, the same on every layout)"
echo "bert with dropout, taken: $(grep '^model: dropout' "$work/taken.log")"
expect_refusal 2 "$work/nonzero.log" "model.dropout: a dropout probability is in [0, 1), got 1" \
  "$xtrain" validate "$work/bert.yaml" --set model.dropout=1
echo "model.dropout 1 (exit 2): $(cat "$work/nonzero.log")"

"$xtrain" train "$work/bert.yaml" --set run.dir="$work/bert_run" --set model.dropout=0 > "$work/bert.log" 2>&1 || {
  cat "$work/bert.log"
  exit 1
}
note="model: trains without the dropout of its Hugging Face config (hidden_dropout_prob 0.1, \
attention_probs_dropout_prob 0.1; model.dropout: 0); the export keeps those values"
[[ $(grep -cxF "$note" "$work/bert.log") == 1 ]] || { echo "the log lacks, once: $note"; cat "$work/bert.log"; exit 1; }
echo "bert with model.dropout 0, the log: $note"
"$xtrain" export "$work/bert_run/checkpoints/latest" "$work/bert_export" > /dev/null
for file in tokenizer.json tokenizer_config.json special_tokens_map.json; do
  cmp "$work/bert/$file" "$work/bert_export/$file"
done
"$python" - "$work" <<'PY'
import json, sys
work = sys.argv[1]
fields = ("hidden_dropout_prob", "attention_probs_dropout_prob", "pad_token_id", "classifier_dropout")
imported = json.load(open(f"{work}/bert/config.json"))
exported = json.load(open(f"{work}/bert_export/config.json"))
steps = [json.loads(line) for line in open(f"{work}/bert_run/metrics.jsonl") if '"loss"' in line]
print("bert imported config.json:", {k: imported[k] for k in fields})
print("bert exported config.json:", {k: exported[k] for k in fields}, f"after {len(steps)} steps")
for k in fields:
    assert exported[k] == imported[k], (k, exported[k], imported[k])
assert len(steps) == 2
PY

#!/usr/bin/env bash
# BERT with the masked-LM objective on the demo corpus and its WordPiece tokenizer: 20 steps as
# one process and as FSDP 2 give the same per-step losses and weights (1e-5); the export loads in
# transformers (BertForMaskedLM), whose MLM loss and masked-token accuracy on a held-out batch
# equal xtrain's (`xtrain eval` on the same samples, which `xtrain data batch` writes); generate
# refuses the encoder, and a decoder recipe with data.objective mlm is refused.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work
cat > "$work/recipe.yaml" <<YAML
name: bert-check
model:
  family: bert
  hidden_size: 64
  num_layers: 2
  num_heads: 4
  intermediate_size: 128
  tie_embeddings: true
data:
  train: builtin:demo
  eval: builtin:demo-eval
  tokenizer: hf:$srcdir/data/tokenizers/bert-demo.json
  objective: mlm
  seq_len: 64
train:
  steps: 20
  global_batch_size: 8
  micro_batch_size: 4
  log_every: 5
  threads: 1
optim:
  lr: 2.0e-3
  warmup_steps: 5
checkpoint:
  every: 10
  keep: 2
YAML

train single 1
train fsdp2 2 --set parallel.fsdp=2
grep -q "parallel: 2 ranks (torchrun), FSDP 2" "$work/fsdp2.log"
compare_runs "$work/single" "$work/fsdp2"

# The export, scored by transformers on 8 held-out samples, against xtrain's eval of them.
"$xtrain" data batch "$work/recipe.yaml" --split eval --count 8 --out "$work/batch.safetensors"
ours=$("$xtrain" eval "$work/recipe.yaml" --set run.dir="$work/single" --set train.micro_batch_size=8 \
  --set train.eval_batches=1 | grep '^eval loss')
theirs=$("$python" "$srcdir/tools/reference/mlm_loss.py" "$work/single/export" "$work/batch.safetensors")
echo "xtrain: $ours"
echo "$theirs"
"$python" - "$ours" "$theirs" <<'PY'
import re, sys
ours, theirs = sys.argv[1], sys.argv[2]
loss_a = float(re.search(r"eval loss ([0-9.]+)", ours).group(1))
acc_a = float(re.search(r"accuracy ([0-9.]+)", ours).group(1))
loss_b = float(re.search(r"mlm loss ([0-9.]+)", theirs).group(1))
acc_b = float(re.search(r"accuracy ([0-9.]+)", theirs).group(1))
tokens_a = int(re.search(r"\| ([0-9]+) tokens", ours).group(1))
tokens_b = int(re.search(r"\| ([0-9]+) targets", theirs).group(1))
assert tokens_a == tokens_b, (tokens_a, tokens_b)
assert abs(loss_a - loss_b) <= 1e-5 * loss_b, (loss_a, loss_b)
assert abs(acc_a - acc_b) <= 1e-4, (acc_a, acc_b)
print(f"held-out MLM loss: xtrain {loss_a:.6f}, transformers {loss_b:.6f} (relative difference "
      f"{abs(loss_a - loss_b) / loss_b:.1e}); masked-token accuracy {acc_a:.4f} and {acc_b:.4f}")
PY

# An encoder does not generate text: exit 2 with the reason.
status=0
"$xtrain" generate "$work/single/checkpoints/latest" --prompt "once" > "$work/generate.log" 2>&1 || status=$?
[[ $status == 2 ]] || { cat "$work/generate.log"; echo "generate on bert exited $status"; exit 1; }
grep -q "a bert checkpoint is an encoder, which predicts masked tokens and does not generate text" "$work/generate.log"

# A decoder does not learn masked tokens.
cat > "$work/bad.yaml" <<YAML
name: bad
data:
  objective: mlm
YAML
if "$xtrain" validate "$work/bad.yaml" > "$work/bad.log" 2>&1; then echo "mlm with llama validated"; exit 1; fi
grep -q "bad.yaml:3:3: data.objective: mlm trains an encoder, and model.family llama is a decoder: set model.family bert, or data.objective clm" "$work/bad.log" || { cat "$work/bad.log"; exit 1; }

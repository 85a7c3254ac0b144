#!/usr/bin/env bash
# Keyed dropout (model/layers/keyed_dropout.h) on BERT, model.dropout 0.1: 20 steps as one
# process, as FSDP 2, as DP 2, as PP 2 (a layer a stage), as TP 2 (a rank's attention masks its
# heads' of one process's) and with gradient accumulation (micro batches of 2) give the same
# per-step losses, gradient norms and weights (1e-5): the masks are keyed by the sample, token,
# layer, head and feature, not drawn from a generator each rank advances. Dropout changes the loss against model.dropout
# 0 and evaluation draws none; a run stopped at step 10 and resumed ends bit-identical to the
# straight one. A family that computes no dropout, and a probability outside [0, 1), exit 2
# naming the key.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
source "$srcdir/tests/integration/lib/expect.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work
cat > "$work/recipe.yaml" <<YAML
name: dropout-check
model:
  family: bert
  hidden_size: 64
  num_layers: 2
  num_heads: 4
  intermediate_size: 128
  tie_embeddings: true
  dropout: 0.1
data:
  train: builtin:demo
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
grep -q "model: dropout 0.1" "$work/single.log"
train fsdp2 2 --set parallel.fsdp=2
grep -q "parallel: 2 ranks (torchrun), FSDP 2" "$work/fsdp2.log"
compare_runs "$work/single" "$work/fsdp2"
train dp2 2 --set parallel.dp=2
compare_runs "$work/single" "$work/dp2"
train accumulated 1 --set train.micro_batch_size=2
compare_runs "$work/single" "$work/accumulated"
train pp2 2 --set parallel.pp=2
grep -q "parallel: 2 ranks (torchrun), DDP 1, 2 pipeline stages" "$work/pp2.log"
compare_runs "$work/single" "$work/pp2"
train tp2 2 --set parallel.tp=2
grep -q "parallel: 2 ranks (torchrun), DDP 1, tensor-parallel over tp 2" "$work/tp2.log"
compare_runs "$work/single" "$work/tp2"

# Dropout is computed: step 1's loss differs from model.dropout 0's on the same weights and batch.
train nodrop 1 --set model.dropout=0 --stop-at-step 1
first_loss() { grep -m1 '"step":1,' "$1/metrics.jsonl" | sed -E 's/.*"loss":([^,]*),.*/\1/'; }
with=$(first_loss "$work/single") without=$(first_loss "$work/nodrop")
echo "dropout: step 1 loss $with with model.dropout 0.1, $without with 0"
[[ "$with" != "$without" ]] || { echo "dropout: model.dropout 0.1 left the loss unchanged"; exit 1; }

# Evaluation draws no dropout: the training run's own evaluation (its model has dropout 0.1)
# equals `xtrain eval` of its checkpoint with model.dropout 0.
train evaluated 1 --set train.steps=2 --set optim.warmup_steps=1 --set checkpoint.every=2 \
  --set data.eval=builtin:demo-eval --set train.eval_every=2 --set train.eval_batches=2
in_training=$(grep '"eval_loss"' "$work/evaluated/metrics.jsonl" | tail -1 | sed -E 's/.*"eval_loss":([^,}]*).*/\1/')
standalone=$("$xtrain" eval "$work/recipe.yaml" --set run.dir="$work/evaluated" --set data.eval=builtin:demo-eval \
  --set train.eval_batches=2 --set model.dropout=0 | sed -nE 's/^eval loss ([0-9.]+) .*/\1/p')
echo "dropout: eval loss in training (model.dropout 0.1) $in_training, xtrain eval with model.dropout 0 $standalone"
# Within the printed digits (eval prints 6 decimals); dropout 0.1 moves the loss by far more.
awk -v a="$in_training" -v b="$standalone" 'BEGIN { d = a - b; exit !(d < 2e-6 && d > -2e-6) }' ||
  { echo "dropout: the training run's evaluation drew dropout"; exit 1; }

# Stopped after step 10's checkpoint and resumed: the step-20 checkpoint bit-identical.
train resumed 1 --stop-at-step 10
grep -q "stopped at step 10 of 20" "$work/resumed.log"
train resumed 1
grep -q "resumed from .*step-10 at step 10" "$work/resumed.log"
for file in model.safetensors optimizer.safetensors; do
  cmp "$work/single/checkpoints/step-20/$file" "$work/resumed/checkpoints/step-20/$file"
done
echo "dropout: 20 steps straight == 10 + resumed 10, bit-identical"

# Refusals: a family without dropout, and a probability of 1.
expect_refusal 2 "$work/llama.log" "model.dropout: 0.1: model.family llama computes no dropout (only bert" \
  "$xtrain" train "$work/recipe.yaml" --set model.family=llama --set data.objective=clm --set model.tie_embeddings=false \
  --set data.tokenizer=byte --set run.dir="$work/llama"
expect_refusal 2 "$work/one.log" "a dropout probability is in [0, 1), got 1" \
  "$xtrain" train "$work/recipe.yaml" --set model.dropout=1 --set run.dir="$work/one"
echo "dropout: BERT with model.dropout 0.1: one process == FSDP 2 == DP 2 == accumulation 2; resume bit-exact"

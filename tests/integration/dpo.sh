#!/usr/bin/env bash
# data.objective dpo against TRL's DPOTrainer (tools/reference/dpo_trl.py): on a tiny random
# Llama that transformers writes and a reference model of its own (dpo.reference), one step of
# xtrain over four preference pairs, in two micro batches, gives TRL's loss, gradients and
# rewards metrics within 1e-6 (fp32; relative to the larger of 1 and the figure's scale), for the sigmoid and the ipo loss. FSDP 2 then trains
# 3 steps as one process does (losses, gradient norms and weights within 1e-5), and a run
# stopped and resumed ends with the same weights bit for bit; a mixture of experts under expert
# parallelism 2 trains as one process does. Bad preference
# data: hostile/case_preference_rows_bad.sh.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
source "$srcdir/tests/integration/lib/expect.sh"
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
"$python" -c "import trl" 2> /dev/null || { echo "dpo: no trl in $python (requirements/python.txt)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work
"$python" "$srcdir/tools/reference/dpo_trl.py" make --out "$work/model" --reference "$work/ref" \
  --data "$work/prefs.jsonl" > /dev/null 2>&1

cat > "$work/recipe.yaml" <<YAML
name: dpo-check
model:
  init_from: hf:$work/model
data:
  train: $work/prefs.jsonl
  tokenizer: byte
  objective: dpo
  seq_len: 48
  shuffle: false
dpo:
  beta: 0.1
  reference: hf:$work/ref
train:
  steps: 1
  global_batch_size: 8
  micro_batch_size: 4
  log_every: 1
  threads: 1
optim:
  lr: 1.0e-3
  warmup_steps: 0
  betas: [0.0, 0.999]
  weight_decay: 0
  grad_clip: 0
checkpoint:
  every: 1
YAML

# Acceptance: each loss against TRL (beta1 0: the first moment is the step's gradient).
for loss in sigmoid ipo; do
  train "$loss" 1 --set dpo.loss=$loss
done
"$python" "$srcdir/tools/reference/dpo_trl.py" compare --model "$work/model" --reference "$work/ref" \
  --data "$work/prefs.jsonl" --seq-len 48 --beta 0.1 --case sigmoid:"$work/sigmoid" --case ipo:"$work/ipo" \
  2> "$work/trl.log" || { cat "$work/trl.log"; exit 1; }

# FSDP 2 against one process, 3 steps (the pairs' second epoch included).
parity=(--set train.steps=3 --set train.global_batch_size=4 --set train.micro_batch_size=2 --set checkpoint.every=3)
train single 1 "${parity[@]}"
train fsdp 2 "${parity[@]}" --set parallel.fsdp=2
compare_runs "$work/single" "$work/fsdp"
grep -q '"rewards/margins"' "$work/fsdp/metrics.jsonl" || { cat "$work/fsdp/metrics.jsonl"; exit 1; }

# Stopped after step 2 and resumed (the reference rebuilt from the folder), the weights are the
# uninterrupted run's, bit for bit.
train resumed 1 "${parity[@]}" --stop-at-step 2 --set checkpoint.every=1
train resumed 1 "${parity[@]}" --set checkpoint.every=1
cmp "$work/single/checkpoints/step-3/model.safetensors" "$work/resumed/checkpoints/step-3/model.safetensors"

# A mixture of experts (a random Qwen3-MoE, its reference the initial weights) with its experts
# split over expert parallelism 2 trains as one process does.
moe=("${parity[@]}" --set model.init_from= --set dpo.reference= --set run.seed=3 --set model.family=qwen3_moe
     --set model.hidden_size=64 --set model.num_layers=2 --set model.num_heads=4 --set model.num_kv_heads=2
     --set model.num_experts=4 --set model.num_experts_per_tok=2 --set model.moe_intermediate_size=48
     --set model.first_k_dense=1 --set model.router_aux_loss_coef=0.01)
train moe_single 1 "${moe[@]}"
train moe_ep2 2 "${moe[@]}" --set parallel.ep=2
grep -q "experts split over ep 2" "$work/moe_ep2.log" || fail "moe_ep2 did not split its experts"
compare_runs "$work/moe_single" "$work/moe_ep2"

#!/usr/bin/env bash
# model.lora against PEFT: a tiny random Llama that transformers writes, adapters on all seven
# projections (rank 4, alpha 8), 4 steps from model.init_from. Start-up says what trains (the
# adapters' count, the frozen base's, and an optimizer state of two values per adapter
# parameter); the checkpoint's base weights stay bit-identical to the folder's; `xtrain export
# --adapter` writes PEFT's adapter_config.json and adapter_model.safetensors, which
# peft.PeftModel.from_pretrained loads onto the transformers base for xtrain's eval loss within
# 1e-5, and whose logits the merged export (W + alpha/r B A) gives within 1e-5. FSDP 2 trains as
# one process does (losses, gradient norms, merged weights within 1e-5); a run stopped and
# resumed ends with the same losses and adapters bit for bit. Bad input: a target that names no
# module, rank 0, a dropout of 1, an unsupported family or layout: exit 2 naming the key. LoRA
# dropout 0.1 (keyed masks): step 3's loss and adapter gradient norm equal PEFT's given the same
# masks (1e-5), and FSDP 2 and full recompute draw the masks one process draws. A qwen2 (biases
# on q, k and v beside the adapters), three mixtures of experts (qwen3_moe, mixtral, gpt_oss:
# adapters on attention; qwen3_moe under FSDP 2 as one process) and a DeepSeek-V3 (latent
# attention's five projections) against PEFT as well.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
source "$srcdir/tests/integration/lib/expect.sh"
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
"$python" -c "import peft" 2> /dev/null || { echo "lora: no peft in $python (requirements/python.txt)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work
"$python" "$srcdir/tools/reference/lora_peft.py" make --data-dir "$work" --model "llama:$work/base" \
  --model "qwen2:$work/qwen2-base" --model "qwen3_moe:$work/qwen3_moe-base" --model "mixtral:$work/mixtral-base" \
  --model "gpt_oss:$work/gpt_oss-base" --model "deepseek_v3:$work/deepseek_v3-base" \
  > /dev/null 2>&1

targets="q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"
cat > "$work/recipe.yaml" <<YAML
name: lora-check
model:
  init_from: hf:$work/base
  lora:
    rank: 4
    alpha: 8
    targets: [$targets]
data:
  train: $work/train.jsonl
  eval: $work/eval.jsonl
  tokenizer: byte
  seq_len: 32
train:
  steps: 4
  global_batch_size: 8
  micro_batch_size: 4
  log_every: 1
  eval_batches: 0
  threads: 1
optim:
  lr: 1.0e-2
  min_lr: 1.0e-3
  warmup_steps: 0
checkpoint:
  every: 2
YAML

# Bad input, before any work.
expect_refusal 2 "$work/bad.log" \
  "model.lora.targets: 'qproj' names no module of model.family llama; its modules are q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj" \
  "$xtrain" validate "$work/recipe.yaml" --set "model.lora.targets=[q_proj,qproj]"
expect_refusal 2 "$work/bad.log" "model.lora.rank: must be >= 1, got 0" \
  "$xtrain" validate "$work/recipe.yaml" --set model.lora.rank=0
expect_refusal 2 "$work/bad.log" "model.lora.dropout: a dropout probability is in [0, 1), got 1" \
  "$xtrain" validate "$work/recipe.yaml" --set model.lora.dropout=1
expect_refusal 2 "$work/bad.log" "model.lora.dropout: 0.1: data.objective grpo compares the log-probabilities of forwards that dropout would make disagree (TRL's trainers turn it off); set 0" \
  "$xtrain" validate "$work/recipe.yaml" --set model.lora.dropout=0.1 --set data.objective=grpo
expect_refusal 2 "$work/bad.log" "model.lora.alpha: must be > 0" \
  "$xtrain" validate "$work/recipe.yaml" --set model.lora.alpha=0
expect_refusal 2 "$work/bad.log" "parallel.tp: 2: LoRA adapters train under parallel.fsdp" \
  "$xtrain" validate "$work/recipe.yaml" --set parallel.tp=2
expect_refusal 2 "$work/bad.log" "model.family bert takes no LoRA adapters yet; the families that do are llama, qwen2, qwen3, qwen3_moe, mixtral, deepseek_v3, gpt_oss" \
  "$xtrain" validate "$work/recipe.yaml" --set model.init_from= --set model.family=bert --set data.objective=mlm \
  --set model.hidden_size=64 --set model.num_layers=2 --set model.num_heads=4

# One process: what trains, and the state it takes (per layer r x (in + out) over 7 projections:
# 4 x (128 + 96 + 96 + 128 + 3 x 224) = 4480, two layers).
train one 1
expect_text "$work/one.log" "lora: rank 4, alpha 8 on q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj (14 layers): 8960 adapter parameters train, 119232 base parameters frozen; optimizer state 17920 values on this rank (70.0 KiB)"
"$python" - "$work/base/model.safetensors" "$work/one/checkpoints/latest/model.safetensors" <<'PY'
import sys
from safetensors.numpy import load_file
base, trained = load_file(sys.argv[1]), load_file(sys.argv[2])
adapters = [n for n in trained if ".lora_" in n]
assert sorted(set(trained) - set(adapters)) == sorted(base), (sorted(base), sorted(trained))
changed = [n for n in base if (base[n] != trained[n]).any()]
assert not changed, f"frozen base weights moved: {changed}"
print(f"lora: {len(base)} base tensors bit-identical to the folder's after training, {len(adapters)} adapter tensors")
PY

# PEFT on the transformers base against xtrain's final eval loss; the merged export's logits.
"$xtrain" export "$work/one/checkpoints/latest" "$work/adapter" --adapter > "$work/export.log" 2>&1 || {
  cat "$work/export.log"
  exit 1
}
expect_text "$work/export.log" "exported 28 adapter tensors"
"$xtrain" export "$work/one/checkpoints/latest" "$work/merged" > "$work/export.log" 2>&1
expect_text "$work/export.log" "merged the LoRA adapters of 14 layers into their weights (W + 2 B A)"
grep -q '"base_model_name_or_path": "'"$work"'/base"' "$work/adapter/adapter_config.json" || {
  cat "$work/adapter/adapter_config.json"
  exit 1
}
if grep -q xtrain_lora "$work/merged/config.json"; then echo "the merged config.json names the adapters"; exit 1; fi
# qwen2: the adapters beside the q, k and v biases, likewise.
train qwen2 1 --set model.init_from=hf:$work/qwen2-base
expect_text "$work/qwen2.log" "lora: rank 4, alpha 8 on q_proj"
"$xtrain" export "$work/qwen2/checkpoints/latest" "$work/qwen2-adapter" --adapter > /dev/null 2>&1
"$xtrain" export "$work/qwen2/checkpoints/latest" "$work/qwen2-merged" > /dev/null 2>&1
# The mixtures (qwen3_moe: a dense first layer, then 4 experts; mixtral: 4 experts in every layer;
# gpt_oss: sinks, biased projections, a sliding window, 4 biased experts): adapters on attention's
# projections (their experts are 3-D tensors), and an MLP target refused.
attention=q_proj,k_proj,v_proj,o_proj
for family in qwen3_moe mixtral gpt_oss; do
  train "$family" 1 --set model.init_from=hf:$work/$family-base --set "model.lora.targets=[$attention]"
  expect_text "$work/$family.log" "lora: rank 4, alpha 8 on q_proj, k_proj, v_proj, o_proj (8 layers)"
  "$xtrain" export "$work/$family/checkpoints/latest" "$work/$family-adapter" --adapter > /dev/null 2>&1
  "$xtrain" export "$work/$family/checkpoints/latest" "$work/$family-merged" > /dev/null 2>&1
done
expect_refusal 2 "$work/bad.log" \
  "model.lora.targets: 'gate_proj' names no module of model.family qwen3_moe; its modules are q_proj, k_proj, v_proj, o_proj" \
  "$xtrain" validate "$work/recipe.yaml" --set model.init_from=hf:$work/qwen3_moe-base
# DeepSeek-V3: latent attention's projections, its queries through the q_lora_rank bottleneck;
# the expert bias is the base's, frozen.
latent=q_a_proj,q_b_proj,kv_a_proj_with_mqa,kv_b_proj,o_proj
deepseek=(--set model.init_from=hf:$work/deepseek_v3-base --set "model.lora.targets=[$latent]")
expect_refusal 2 "$work/bad.log" \
  "model.lora.targets: 'q_proj' names no module of model.family deepseek_v3; its modules are q_a_proj, q_b_proj, kv_a_proj_with_mqa, kv_b_proj, o_proj" \
  "$xtrain" validate "$work/recipe.yaml" "${deepseek[@]}" --set model.router_bias_update_rate=0 \
  --set "model.lora.targets=[q_proj,kv_b_proj]"
expect_refusal 2 "$work/bad.log" \
  "model.router_bias_update_rate: 0.001: the expert bias is part of the base, which model.lora freezes, and an adapter file does not carry it (PEFT loads the base's); set 0" \
  "$xtrain" validate "$work/recipe.yaml" "${deepseek[@]}"
train deepseek_v3 1 "${deepseek[@]}" --set model.router_bias_update_rate=0
expect_text "$work/deepseek_v3.log" "lora: rank 4, alpha 8 on q_a_proj, q_b_proj, kv_a_proj_with_mqa, kv_b_proj, o_proj (10 layers)"
"$xtrain" export "$work/deepseek_v3/checkpoints/latest" "$work/deepseek_v3-adapter" --adapter > /dev/null 2>&1
"$xtrain" export "$work/deepseek_v3/checkpoints/latest" "$work/deepseek_v3-merged" > /dev/null 2>&1
final_loss() { grep -o '"eval_loss":[^,]*' "$1/metrics.jsonl" | tail -1 | cut -d: -f2; }
"$python" "$srcdir/tools/reference/lora_peft.py" check --data "$work/eval.jsonl" --seq-len 32 --rank 4 --alpha 8 \
  --targets "$targets" --case "llama:$work/base:$work/adapter:$work/merged:$(final_loss "$work/one")" \
  --case "qwen2:$work/qwen2-base:$work/qwen2-adapter:$work/qwen2-merged:$(final_loss "$work/qwen2")" \
  --case "qwen3_moe:$work/qwen3_moe-base:$work/qwen3_moe-adapter:$work/qwen3_moe-merged:$(final_loss "$work/qwen3_moe"):$attention" \
  --case "mixtral:$work/mixtral-base:$work/mixtral-adapter:$work/mixtral-merged:$(final_loss "$work/mixtral"):$attention" \
  --case "gpt_oss:$work/gpt_oss-base:$work/gpt_oss-adapter:$work/gpt_oss-merged:$(final_loss "$work/gpt_oss"):$attention" \
  --case "deepseek_v3:$work/deepseek_v3-base:$work/deepseek_v3-adapter:$work/deepseek_v3-merged:$(final_loss "$work/deepseek_v3"):$latent" \
  2> "$work/peft.log" || { cat "$work/peft.log"; exit 1; }
# eval and generate read the adapters from the checkpoint as from the merged export.
from_checkpoint=$("$xtrain" generate "$work/one/checkpoints/latest" --prompt "the cat" --max-new-tokens 8 --temperature 0)
from_export=$("$xtrain" generate "$work/merged" --prompt "the cat" --max-new-tokens 8 --temperature 0)
[[ -n $from_checkpoint && $from_export == "$from_checkpoint" ]] || { echo "'$from_export' vs '$from_checkpoint'"; exit 1; }

# FSDP 2 against one process, the dense model and a mixture.
train fsdp2 2 --set parallel.fsdp=2
compare_runs "$work/one" "$work/fsdp2"
train qwen3_moe-fsdp2 2 --set parallel.fsdp=2 --set model.init_from=hf:$work/qwen3_moe-base \
  --set "model.lora.targets=[$attention]"
compare_runs "$work/qwen3_moe" "$work/qwen3_moe-fsdp2"

# Stopped after step 2 and resumed: the same losses and adapters, bit for bit.
train resumed 1 --stop-at-step 2
train resumed 1
expect_match "$work/resumed.log" "resumed from .*step-2 at step 2"
[[ $(losses "$work/one") == "$(losses "$work/resumed")" ]] || { losses "$work/one"; losses "$work/resumed"; exit 1; }
"$xtrain" export "$work/resumed/checkpoints/latest" "$work/resumed-adapter" --adapter > /dev/null 2>&1
cmp "$work/adapter/adapter_model.safetensors" "$work/resumed-adapter/adapter_model.safetensors"
echo "lora: resumed after step 2: $(losses "$work/resumed" | wc -l) losses and the adapters bit-identical to the uninterrupted run"

# Dropout 0.1 on the adapters' input: PEFT, its dropout given xtrain's keyed masks, on the
# step-2 adapters and step 3's batch (the data is 8 windows, one global batch read in order: every
# step trains on all of it) against xtrain's step 3; FSDP 2 against one process.
dropout=(--set data.train="$work/dropout.jsonl" --set data.shuffle=false --set data.eval= --set model.lora.dropout=0.1 --set train.steps=3
         --set checkpoint.every=1 --set run.seed=11)
train dropout 1 "${dropout[@]}"
"$xtrain" export "$work/dropout/checkpoints/step-2" "$work/dropout-adapter" --adapter > /dev/null 2>&1
"$python" "$srcdir/tools/reference/lora_peft.py" dropout-check --base "$work/base" --adapter "$work/dropout-adapter" \
  --data "$work/dropout.jsonl" --seq-len 32 --metrics "$work/dropout/metrics.jsonl" --step 3 --seed 11 \
  2> "$work/peft.log" || { cat "$work/peft.log"; exit 1; }
train dropout-fsdp2 2 "${dropout[@]}" --set parallel.fsdp=2
compare_runs "$work/dropout" "$work/dropout-fsdp2"
# Full recompute reruns each block's forward in backward: with the forward's masks.
train dropout-recompute 1 "${dropout[@]}" --set memory.recompute=full
compare_runs "$work/dropout" "$work/dropout-recompute"

#!/usr/bin/env bash
# Mixture-of-experts layouts train the same model (qwen3_moe, 4 experts, 2 per token, the first
# layer dense, both router losses on): 20 steps of FSDP 2 (with and without recompute), expert
# parallelism over 2 and 4 ranks, EP 2 x FSDP 2 on 4 ranks, EP 2 over plain data parallelism (DDP
# 2, and HSDP: DP 2 x FSDP 2, where the experts' pieces differ across the dp replicas, so each
# replica writes its own to the checkpoint), and EP 2 with its tokens exchanged
# in 2 overlapping parts (Domino-EP) give one process's per-step losses and gradient norms within
# 1e-5; so do transformers' balancing loss over all layers (with recompute), the balancing loss
# over the global batch, the sigmoid router (whose bias ends bit-identical) and a capacity that
# drops tokens. Then resharding: EP 2 x FSDP 2's step-10 checkpoint resumed as EP 4, as FSDP 2
# without EP and as one process continues with its losses.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work
write_recipe "$work/recipe.yaml" 20
moe=(--set model.family=qwen3_moe --set model.num_experts=4 --set model.num_experts_per_tok=2
     --set model.moe_intermediate_size=48 --set model.first_k_dense=1 --set model.router_aux_loss_coef=0.01
     --set model.router_z_loss_coef=0.001)

reference single "${moe[@]}"
train fsdp2 2 "${moe[@]}"
train fsdp2_recompute 2 "${moe[@]}" --set memory.recompute=full
train ep2 2 "${moe[@]}" --set parallel.ep=2
train ep4 4 "${moe[@]}" --set parallel.ep=4
train ep2_fsdp2 4 "${moe[@]}" --set parallel.ep=2
train ep2_domino2 2 "${moe[@]}" --set parallel.ep=2 --set parallel.intra_layer_micro_batch=2
train ep2_dp2 2 "${moe[@]}" --set parallel.ep=2 --set parallel.dp=2 --set parallel.fsdp=1
train ep2_hsdp 4 "${moe[@]}" --set parallel.ep=2 --set parallel.dp=2 --set parallel.fsdp=2
grep -q "parallel: 4 ranks (torchrun), FSDP 4, experts split over ep 2 and sharded over 2" "$work/ep2_fsdp2.log"
grep -q '"aux_loss.load_balancing":' "$work/ep2/metrics.jsonl"
grep -q '"aux_loss.router_z":' "$work/ep2/metrics.jsonl"
# The dispatchers expert parallelism installed report the time blocked on their all-to-alls.
grep -o '"moe.all_to_all_wait_s":[0-9.e+-]*' "$work/ep2/metrics.jsonl" | cut -d: -f2 |
  awk '$1 > 0 { found = 1 } END { exit !found }' || { echo "ep2: no step blocked on an expert all-to-all"; exit 1; }
# The per-step losses and gradient norms hold to 1e-5 as for every layout; the weights to 1e-4:
# the embedding rows of rare tokens, whose router-loss gradients nearly cancel, take AdamW
# updates that last-bit differences of the reduction order tip (5.8e-5 measured, one element of
# model.embed_tokens.weight; every other tensor within 4e-7).
for run in fsdp2 fsdp2_recompute ep2 ep4 ep2_fsdp2 ep2_domino2 ep2_dp2 ep2_hsdp; do compare_runs "$work/single" "$work/$run" 1 1e-4; done

step10=$work/ep2_fsdp2/checkpoints/step-10
for layout in "ep4 4 --set parallel.ep=4" "fsdp2 2" "single 1"; do
  read -r name nproc flags <<< "$layout"
  # shellcheck disable=SC2086
  train "ep2_fsdp2_as_$name" "$nproc" "${moe[@]}" --set checkpoint.resume="$step10" $flags
  grep -q "resumed from $step10 at step 10" "$work/ep2_fsdp2_as_$name.log"
  compare_runs "$work/ep2_fsdp2" "$work/ep2_fsdp2_as_$name" 11 1e-4
done

# transformers' balancing loss, over both MoE layers' routing at once, with recompute: the same.
joint=(--set model.first_k_dense=0 --set model.router_aux_loss_scope=model)
reference joint_single "${moe[@]}" "${joint[@]}"
train joint_ep2_fsdp2 4 "${moe[@]}" "${joint[@]}" --set parallel.ep=2 --set memory.recompute=full
compare_runs "$work/joint_single" "$work/joint_ep2_fsdp2" 1 1e-4

# The balancing loss over the global batch: 2 ranks with micro batches of 4 and the counts summed
# over both are one process with micro batches of 8, for both scopes.
for scope in layer model; do
  global=(--set model.first_k_dense=0 --set model.router_aux_loss_scope=$scope
          --set model.router_aux_loss_global_average=true)
  reference "global_${scope}_single" "${moe[@]}" "${global[@]}" --set train.micro_batch_size=8
  train "global_${scope}_ep2" 2 "${moe[@]}" "${global[@]}" --set train.micro_batch_size=4 --set parallel.ep=2
  compare_runs "$work/global_${scope}_single" "$work/global_${scope}_ep2" 1 1e-4
done

# The sigmoid router with its expert bias: the bias, moved each step by the loads summed over
# the global batch, is bit-identical across layouts after 20 steps, and a resumed run carries it.
sigmoid=(--set model.router=sigmoid_bias --set model.router_bias_update_rate=0.002)
reference sigmoid_single "${moe[@]}" "${sigmoid[@]}"
train sigmoid_ep2_fsdp2 4 "${moe[@]}" "${sigmoid[@]}" --set parallel.ep=2
compare_runs "$work/sigmoid_single" "$work/sigmoid_ep2_fsdp2" 1 1e-4
bias() { "${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}" -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))["expert_bias"]))' "$1/checkpoints/latest/trainer_state.json"; }
[[ "$(bias "$work/sigmoid_single")" == "$(bias "$work/sigmoid_ep2_fsdp2")" ]]
echo "expert bias after 20 steps, 1 process and EP 2 x FSDP 2: identical ($(bias "$work/sigmoid_single"))"
train sigmoid_resumed 1 "${moe[@]}" "${sigmoid[@]}" --set checkpoint.resume="$work/sigmoid_ep2_fsdp2/checkpoints/step-10"
compare_runs "$work/sigmoid_ep2_fsdp2" "$work/sigmoid_resumed" 11 1e-4
[[ "$(bias "$work/sigmoid_single")" == "$(bias "$work/sigmoid_resumed")" ]]

# A capacity: each expert takes at most ceil(1.0 x tokens x k / E) of a micro batch's tokens on
# a rank; the rest are dropped, counted, and the same in every layout (the micro batches are).
capacity=(--set model.capacity_factor=1.0)
reference capacity_single "${moe[@]}" "${capacity[@]}"
train capacity_ep2 2 "${moe[@]}" "${capacity[@]}" --set parallel.ep=2
compare_runs "$work/capacity_single" "$work/capacity_ep2" 1 1e-4
"${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}" - "$work/capacity_ep2/metrics.jsonl" <<'PY'
import json, sys
dropped = [r["moe.dropped_fraction"] for r in map(json.loads, open(sys.argv[1])) if "moe.dropped_fraction" in r]
assert len(dropped) == 20 and min(dropped) > 0, dropped
print(f"capacity factor 1.0: dropped {min(dropped):.1%} to {max(dropped):.1%} of the choices per step")
PY
grep -q "dropped [0-9.]*%" "$work/capacity_ep2.log"

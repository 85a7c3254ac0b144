#!/usr/bin/env bash
# Mixtures of experts under pipeline and tensor parallelism train the same model as one process
# (qwen3_moe, 2 MoE layers of 4 experts, 2 per token, both router losses on): 20 steps
# of PP 2 (1f1b, and interleaved with 2 chunks per rank), TP 2 (with and without sequence
# parallelism), TP 2 x EP 2 and PP 2 x EP 2 on 4 ranks give one process's per-step losses and
# gradient norms within 1e-5, and under PP the logged router losses and expert loads, gathered
# from the stages, are one process's. The sigmoid router's expert bias, moved by every stage from
# the loads of its layers summed over the pipeline, ends bit-identical under PP 2 and TP 2;
# deepseek_v3 (latent attention with a low-rank query under YaRN, a dense first layer, then shared
# and routed experts) trains the same under PP 2, TP 2 and TP 2 with sequence parallelism (the
# heads split after the replicated low-rank projections), its first stage holding no MoE layer. Then
# resharding: PP 2's step-10 checkpoint resumed as TP 2 and as one process continues its losses.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
write_recipe "$work/recipe.yaml" 20
# Each pipeline stage holds one MoE layer. (4 layers, the first dense, reach a loss spike at step
# 15 where TP 2's gradient norm differs from one process's by 2.4e-5 while step 1's agree to
# 1e-8 and every step's expert loads are equal: most likely top-k routing, discontinuous, tipped
# by the last-bit differences of tensor-parallel attention. Two layers stay below 1e-6.)
moe=(--set model.family=qwen3_moe --set model.num_experts=4 --set model.num_experts_per_tok=2
     --set model.moe_intermediate_size=48 --set model.first_k_dense=0 --set model.router_aux_loss_coef=0.01
     --set model.router_z_loss_coef=0.001)

# same_moe_metrics REFERENCE RUN: the logged router losses within 1e-5 and the expert load
# figures equal, step by step.
same_moe_metrics() {
  "$python" - "$1/metrics.jsonl" "$2/metrics.jsonl" <<'PY'
import json, sys
def steps(path):
    return {r["step"]: r for r in map(json.loads, open(path)) if "loss" in r}
a, b = steps(sys.argv[1]), steps(sys.argv[2])
assert a.keys() == b.keys() and a
keys = [k for k in a[min(a)] if k.startswith("aux_loss.") or k.startswith("moe.") and "wait" not in k]
assert any(k.startswith("aux_loss.") for k in keys) and "moe.load_ratio" in keys, keys
worst = 0.0
for s in a:
    for k in keys:
        x, y = a[s][k], b[s][k]
        if k.startswith("aux_loss."):
            worst = max(worst, abs(x - y) / abs(x))
        else:
            assert x == y, (s, k, x, y)
assert worst <= 1e-5, worst
print(f"{sys.argv[2].split('/')[-2]}: router losses within {worst:.2e} (relative), expert loads equal ({', '.join(keys)})")
PY
}
bias() { "$python" -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))["expert_bias"]))' "$1/checkpoints/latest/trainer_state.json"; }

reference single "${moe[@]}"
train pp2 2 "${moe[@]}" --set parallel.pp=2
train pp2_interleaved 2 "${moe[@]}" --set parallel.pp=2 --set parallel.pp_schedule=interleaved_1f1b \
  --set parallel.pp_virtual_stages=2
train tp2 2 "${moe[@]}" --set parallel.tp=2
train tp2_sp 2 "${moe[@]}" --set parallel.tp=2 --set parallel.sequence_parallel=true
train tp2_ep2 4 "${moe[@]}" --set parallel.tp=2 --set parallel.ep=2
train pp2_ep2 4 "${moe[@]}" --set parallel.pp=2 --set parallel.ep=2
grep -q '"aux_loss.router_z":' "$work/pp2/metrics.jsonl"
# Weights to 1e-4, as moe_parallel.sh explains: rare tokens' embedding rows, whose router-loss
# gradients nearly cancel, take AdamW updates that last-bit differences tip.
for run in pp2 pp2_interleaved tp2 tp2_sp tp2_ep2 pp2_ep2; do
  compare_runs "$work/single" "$work/$run" 1 1e-4
  same_moe_metrics "$work/single" "$work/$run"
done

step10=$work/pp2/checkpoints/step-10
for layout in "tp2 2 --set parallel.tp=2" "single 1"; do
  read -r name nproc flags <<< "$layout"
  # shellcheck disable=SC2086
  train "pp2_as_$name" "$nproc" "${moe[@]}" --set checkpoint.resume="$step10" $flags
  grep -q "resumed from $step10 at step 10" "$work/pp2_as_$name.log"
  compare_runs "$work/pp2" "$work/pp2_as_$name" 11 1e-4
done

# The sigmoid router: every stage moves its layers' bias from the loads summed over the data
# ranks and the pipeline, bit for bit one process's.
sigmoid=(--set model.router=sigmoid_bias --set model.router_bias_update_rate=0.002)
reference sigmoid_single "${moe[@]}" "${sigmoid[@]}"
train sigmoid_pp2 2 "${moe[@]}" "${sigmoid[@]}" --set parallel.pp=2
train sigmoid_tp2 2 "${moe[@]}" "${sigmoid[@]}" --set parallel.tp=2 --set parallel.sequence_parallel=true
for run in sigmoid_pp2 sigmoid_tp2; do
  compare_runs "$work/sigmoid_single" "$work/$run" 1 1e-4
  [[ "$(bias "$work/sigmoid_single")" == "$(bias "$work/$run")" ]]
done
echo "expert bias after 20 steps, 1 process, PP 2 and TP 2 with sequence parallelism: identical ($(bias "$work/sigmoid_single"))"

deepseek=(--set model.family=deepseek_v3 --set model.q_lora_rank=24 --set model.kv_lora_rank=32
          --set model.qk_nope_head_dim=16 --set model.qk_rope_head_dim=8 --set model.v_head_dim=16
          --set model.rope_scaling_type=yarn --set model.rope_scaling_factor=4 --set model.rope_original_max_len=16
          --set model.rope_mscale=1 --set model.rope_mscale_all_dim=1 --set model.router=sigmoid_bias
          --set model.num_shared_experts=1 --set model.num_kv_heads=0 --set model.first_k_dense=1)
reference deepseek_single "${moe[@]}" "${deepseek[@]}"
train deepseek_pp2 2 "${moe[@]}" "${deepseek[@]}" --set parallel.pp=2
train deepseek_tp2 2 "${moe[@]}" "${deepseek[@]}" --set parallel.tp=2
train deepseek_tp2_sp 2 "${moe[@]}" "${deepseek[@]}" --set parallel.tp=2 --set parallel.sequence_parallel=true
for run in deepseek_pp2 deepseek_tp2 deepseek_tp2_sp; do
  compare_runs "$work/deepseek_single" "$work/$run" 1 1e-4
  [[ "$(bias "$work/deepseek_single")" == "$(bias "$work/$run")" ]]
done

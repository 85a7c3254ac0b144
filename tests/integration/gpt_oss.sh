#!/usr/bin/env bash
# gpt_oss (layer 0 sliding-window attention over the 8 latest tokens of 64, layer 1 full, a sink
# logit per head, biases on every projection, YaRN; 4 biased, clamped experts per layer, 2 per
# token, under a biased router with the load-balancing loss) trains the same model in every
# layout it takes: 20 steps of FSDP 2, expert parallelism over 2 ranks, EP 2 with Domino-EP's
# overlapping parts, tensor parallelism over 2 ranks (with and without sequence parallelism: the
# sinks split with the heads, the output bias added once), pipeline parallelism over 2 stages,
# and context parallelism over 2 ranks (ring and Ulysses, the window and the
# sinks inside the split attention), on packed documents as well, give one process's per-step
# losses and gradient norms within 1e-5.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
work=$(mktemp -d)
trap '[[ -n "${KEEP_WORK:-}" ]] || rm -rf "$work"' EXIT
export TMPDIR=$work
write_recipe "$work/recipe.yaml" 20
gpt_oss=(--set model.family=gpt_oss --set model.head_dim=16 --set model.sliding_window=8
         --set "model.layer_types=[sliding_attention, full_attention]" --set model.rope_scaling_type=yarn
         --set model.rope_scaling_factor=4 --set model.rope_original_max_len=16 --set model.rope_truncate=false
         --set model.num_experts=4 --set model.num_experts_per_tok=2 --set model.moe_intermediate_size=48
         --set model.intermediate_size=48 --set model.swiglu_limit=1.0 --set model.router_aux_loss_coef=0.01
         --set optim.lr=1e-3)

reference single "${gpt_oss[@]}"
train fsdp2 2 "${gpt_oss[@]}"
train ep2 2 "${gpt_oss[@]}" --set parallel.ep=2
train ep2_domino2 2 "${gpt_oss[@]}" --set parallel.ep=2 --set parallel.intra_layer_micro_batch=2
train tp2 2 "${gpt_oss[@]}" --set parallel.tp=2
train tp2_sp 2 "${gpt_oss[@]}" --set parallel.tp=2 --set parallel.sequence_parallel=true
train pp2 2 "${gpt_oss[@]}" --set parallel.pp=2
train ring2 2 "${gpt_oss[@]}" --set parallel.cp=2
train ulysses2 2 "${gpt_oss[@]}" --set parallel.cp=2 --set parallel.cp_kind=ulysses
grep -q '"aux_loss.load_balancing":' "$work/ep2/metrics.jsonl"
for run in fsdp2 ep2 ep2_domino2 tp2 tp2_sp pp2 ring2 ulysses2; do compare_runs "$work/single" "$work/$run" 1 1e-4; done

# Packed documents: the window and the sinks stop at each document's start, in the split
# attention too.
packed=(--set data.pack=true)
reference packed_single "${gpt_oss[@]}" "${packed[@]}"
train packed_ring2 2 "${gpt_oss[@]}" "${packed[@]}" --set parallel.cp=2
train packed_ep2 2 "${gpt_oss[@]}" "${packed[@]}" --set parallel.ep=2
for run in packed_ring2 packed_ep2; do compare_runs "$work/packed_single" "$work/$run" 1 1e-4; done

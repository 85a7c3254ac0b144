#!/usr/bin/env bash
# deepseek_v3 (multi-head latent attention with a low-rank query, YaRN over interleaved rotary
# features, layer 0 dense and layer 1 four sigmoid-routed experts in two groups beside a shared
# expert, the expert bias moved every step, two multi-token prediction depths) trains the same
# model in every layout it takes (the depths' losses too): 20
# steps of FSDP 2, expert parallelism over 2 ranks, and EP 2 with its tokens exchanged in 2
# overlapping parts (Domino-EP) give one process's per-step losses and gradient norms within
# 1e-5 and its expert bias bit for bit; TP 2 with sequence parallelism (the depths' eh_proj and
# norms on half the sequence, the vocabulary-parallel head shared with them) its losses, the
# depths' too; CP 2 (each depth's tokens and targets shifted over the whole sequence before the
# split, its loss over the whole micro batch's targets; the cp ranks' expert loads summed) its
# losses, gradient norms and expert bias, the depths' too; PP 2 under 1f1b and interleaved 1f1b
# (the depths on the last stage beside the head, with a copy of the embedding table whose
# gradient is summed with the first stage's) the same, and its checkpoint (the table written
# once) resumes as one process, one process's as PP 2; the export holds that bias. (init_from_hf.sh checks a
# folder transformers wrote, trained under FSDP 2 and exported, against transformers' loss.)
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
work=$(mktemp -d)
trap '[[ -n "${KEEP_WORK:-}" ]] || rm -rf "$work"' EXIT
export TMPDIR=$work
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
write_recipe "$work/recipe.yaml" 20
deepseek=(--set model.family=deepseek_v3 --set model.num_kv_heads=0 --set model.q_lora_rank=32
          --set model.kv_lora_rank=32 --set model.qk_nope_head_dim=16 --set model.qk_rope_head_dim=8
          --set model.v_head_dim=16 --set model.rope_scaling_type=yarn --set model.rope_scaling_factor=4
          --set model.rope_original_max_len=16 --set model.rope_mscale=1 --set model.rope_mscale_all_dim=1
          --set model.num_experts=4 --set model.num_experts_per_tok=2 --set model.moe_intermediate_size=48
          --set model.first_k_dense=1 --set model.router=sigmoid_bias --set model.n_group=2
          --set model.topk_group=1 --set model.num_shared_experts=1 --set model.routed_scaling_factor=2.5
          --set model.router_bias_update_rate=0.002 --set model.mtp_layers=2 --set model.mtp_loss_weight=0.3
          --set optim.lr=1e-3)

reference single "${deepseek[@]}"
train fsdp2 2 "${deepseek[@]}"
train ep2 2 "${deepseek[@]}" --set parallel.ep=2
train ep2_domino2 2 "${deepseek[@]}" --set parallel.ep=2 --set parallel.intra_layer_micro_batch=2
# Micro batches of 4 under TP and CP (two a step, as the data-parallel layouts run): half their
# collectives.
train tp2_sp 2 "${deepseek[@]}" --set parallel.tp=2 --set parallel.sequence_parallel=true --set train.micro_batch_size=4
train cp2 2 "${deepseek[@]}" --set parallel.cp=2 --set train.micro_batch_size=4
pp2=(--set parallel.pp=2 --set parallel.fsdp=1)
train pp2 2 "${deepseek[@]}" "${pp2[@]}"
train pp2_interleaved 2 "${deepseek[@]}" "${pp2[@]}" --set parallel.pp_schedule=interleaved_1f1b \
      --set parallel.pp_virtual_stages=2
grep -q "deepseek_v3" "$work/single/checkpoints/latest/config.json"
# Each depth's loss is logged apart, and every layout gives one process's.
"$python" - "$work" <<'PY'
import json, sys
work = sys.argv[1]
def depths(run):
    return {r["step"]: (r["aux_loss.mtp_1"], r["aux_loss.mtp_2"]) for r in map(json.loads, open(f"{work}/{run}/metrics.jsonl"))
            if "aux_loss.mtp_1" in r}
single = depths("single")
assert len(single) == 20, sorted(single)
for run in ("fsdp2", "ep2", "ep2_domino2", "tp2_sp", "cp2", "pp2", "pp2_interleaved"):
    other = depths(run)
    worst = max(abs(a - b) / a for s in single for a, b in zip(single[s], other[s]))
    print(f"{run}: multi-token prediction losses (2 depths) within {worst:.2e} of one process's")
    assert worst < 1e-5, worst
print(f"depth losses at steps 1 and 20: {single[1]} -> {single[20]}")
PY
bias() { "$python" -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))["expert_bias"]))' "$1/checkpoints/latest/trainer_state.json"; }
for run in fsdp2 ep2 ep2_domino2 cp2 pp2 pp2_interleaved; do
  compare_runs "$work/single" "$work/$run" 1 1e-4
  [[ "$(bias "$work/single")" == "$(bias "$work/$run")" ]]
done
echo "expert bias after 20 steps: identical in every layout ($(bias "$work/single"))"
compare_runs "$work/single" "$work/tp2_sp" 1 1e-4

# PP 2: a step-10 checkpoint (the depths on the last stage, the embedding table written once,
# the first stage's) resumes as one process, and one process's as PP 2.
step10=$work/pp2/checkpoints/step-10
"$python" - "$step10" <<'PY'
import json, struct, sys
def names(shard):
    with open(f"{sys.argv[1]}/shard-0000{shard}.safetensors", "rb") as f:
        return {k.split("/", 1)[1] for k in json.loads(f.read(struct.unpack("<Q", f.read(8))[0])) if k.startswith("model/")}
first, last = names(0), names(1)
assert "model.embed_tokens.weight" in first and "model.embed_tokens.weight" not in last, "the table written twice"
assert {n for n in first | last if n.startswith(("model.layers.2.", "model.layers.3."))} <= last, "a depth off the last stage"
print(f"PP 2 checkpoint: the embedding table in stage 0's shard only, the depths in stage 1's ({len(last)} tensors)")
PY
train pp2_as_single 1 "${deepseek[@]}" --set checkpoint.resume="$step10"
grep -q "resumed from $step10 at step 10" "$work/pp2_as_single.log"
compare_runs "$work/pp2" "$work/pp2_as_single" 11
train single_as_pp2 2 "${deepseek[@]}" "${pp2[@]}" --set checkpoint.resume="$work/single/checkpoints/step-10"
compare_runs "$work/single" "$work/single_as_pp2" 11

# The one-process checkpoint (stacked experts, the bias in its trainer state, two prediction
# depths) generates as its export does.
from_checkpoint=$("$xtrain" generate "$work/single/checkpoints/latest" --prompt "The" --max-new-tokens 12 --temperature 0)
from_export=$("$xtrain" generate "$work/single/export" --prompt "The" --max-new-tokens 12 --temperature 0)
[[ -n $from_export && $from_export == "$from_checkpoint" ]] || { echo "'$from_export' vs '$from_checkpoint'"; exit 1; }

# The export holds the expert bias the run moved.
"$python" - "$work/single/export" "$work/single/checkpoints/latest/trainer_state.json" <<'PY'
import json, sys
from safetensors.numpy import load_file  # numpy: torch's import would cost 2 s
tensors = load_file(f"{sys.argv[1]}/model.safetensors")
biases = json.load(open(sys.argv[2]))["expert_bias"]
for name, values in biases.items():
    assert tensors[name].tolist() == values, name
assert any(v != 0 for values in biases.values() for v in values)
print(f"export: {len(biases)} expert bias tensor(s), equal to the trainer state's")
PY

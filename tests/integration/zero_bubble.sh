#!/usr/bin/env bash
# The zero-bubble schedules: parallel.pp_schedule zb_h1 on 4 stages with 8 micro batches (a
# 4-layer model, micro batches of 1), and under TP 2 x PP 2, and zbv (two chunks a rank in a V, a
# 6-layer model for its 8 chunks) on 4 stages with 8 micro batches, and both on a mixture of
# experts under EP 2 (4 stages x DDP 2, 8 ranks; the experts' weight gradients come in I, the
# Linear layers' in W), and dualpipev (PyTorch's ScheduleDualPipeV in the same V, forwards paired
# with whole backwards) on both, give one process's per-step losses and gradient norms within
# 1e-5 over 20 steps and its weights; dualpipev resumed from its step-10 checkpoint gives its own
# steps 11-20 and final weights bit for bit; zb_h1's 4 stages hold at most pp = 4 micro batches
# each, dualpipev's 2 pp + 1 = 9 chunk-micro-batches; and the recipe check refuses them, exit 2,
# where their weight gradients would come too late (FSDP within a stage), zbv or dualpipev is not
# given its two chunks a rank, or dualpipev fewer than 2 pp micro batches a step, naming the key.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work
write_recipe "$work/recipe.yaml" 20
four=(--set model.num_layers=4 --set optim.lr=1e-3 --set train.micro_batch_size=1)

train single 1 "${four[@]}"
train zb_h1 4 "${four[@]}" --set parallel.pp=4 --set parallel.fsdp=1 --set parallel.pp_schedule=zb_h1
train tp2_zb_h1 4 "${four[@]}" --set parallel.pp=2 --set parallel.tp=2 --set parallel.fsdp=1 \
  --set parallel.pp_schedule=zb_h1
for run in zb_h1 tp2_zb_h1; do compare_runs "$work/single" "$work/$run"; done
six=(--set model.num_layers=6 --set optim.lr=1e-3 --set train.micro_batch_size=1)
train single6 1 "${six[@]}"
train zbv 4 "${six[@]}" --set parallel.pp=4 --set parallel.fsdp=1 --set parallel.pp_schedule=zbv \
  --set parallel.pp_virtual_stages=2
train dualpipev 4 "${six[@]}" --set parallel.pp=4 --set parallel.fsdp=1 --set parallel.pp_schedule=dualpipev \
  --set parallel.pp_virtual_stages=2
for run in zbv dualpipev; do compare_runs "$work/single6" "$work/$run"; done
step10=$work/dualpipev/checkpoints/step-10
train dualpipev_resumed 4 "${six[@]}" --set parallel.pp=4 --set parallel.fsdp=1 --set parallel.pp_schedule=dualpipev \
  --set parallel.pp_virtual_stages=2 --set checkpoint.resume="$step10"
grep -q "resumed from $step10 at step 10" "$work/dualpipev_resumed.log"
diff <(losses "$work/dualpipev" | tail -n 10) <(losses "$work/dualpipev_resumed")
for run in dualpipev dualpipev_resumed; do export_latest "$work/$run"; done
cmp "$work/dualpipev/export/model.safetensors" "$work/dualpipev_resumed/export/model.safetensors"
echo "dualpipev resumed at step 10: steps 11-20's losses and the final weights identical"
moe=("${six[@]}" --set model.family=qwen3_moe --set model.num_experts=4 --set model.num_experts_per_tok=2
     --set model.moe_intermediate_size=48 --set model.first_k_dense=1 --set train.global_batch_size=16)
train moe_single 1 "${moe[@]}"
train moe_zb_h1_ep2 8 "${moe[@]}" --set parallel.pp=4 --set parallel.dp=2 --set parallel.fsdp=1 --set parallel.ep=2 \
  --set parallel.pp_schedule=zb_h1
train moe_zbv_ep2 8 "${moe[@]}" --set parallel.pp=4 --set parallel.dp=2 --set parallel.fsdp=1 --set parallel.ep=2 \
  --set parallel.pp_schedule=zbv --set parallel.pp_virtual_stages=2
train moe_dualpipev_ep2 8 "${moe[@]}" --set parallel.pp=4 --set parallel.dp=2 --set parallel.fsdp=1 \
  --set parallel.ep=2 --set parallel.pp_schedule=dualpipev --set parallel.pp_virtual_stages=2
for run in moe_zb_h1_ep2 moe_zbv_ep2 moe_dualpipev_ep2; do compare_runs "$work/moe_single" "$work/$run"; done
"${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}" - "$work/zb_h1/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"pp.in_flight_by_stage"' in l]
held = rows[-1]["pp.in_flight_by_stage"]
print(f"zb_h1: micro batches held at once by stage {held}")
assert held == [4, 4, 4, 4], held
PY
grep -o '"pp.in_flight_by_stage":[^]]*]' "$work/zbv/metrics.jsonl" | tail -1 | sed 's/^/zbv: /'
grep -o '"pp.in_flight_by_stage":[^]]*]' "$work/dualpipev/metrics.jsonl" | tail -1 | tee "$work/held" | sed 's/^/dualpipev: /'
grep -qF '[9.0,9.0,9.0,9.0]' "$work/held"

# expect NAME EXPECTED_STDERR RECIPE_TEXT: exit 2 with the exact message (bad_recipes.sh's way).
expect() {
  local name=$1 expected=$2 stderr status
  printf '%s' "$3" > "$work/$name.yaml"
  stderr=$("$xtrain" validate "$work/$name.yaml" 2>&1 >/dev/null) && status=0 || status=$?
  [[ $status == 2 && "$stderr" == "$expected" ]] || { echo "$name: exit $status, got: $stderr"; exit 1; }
  echo "$name: exit 2: ${stderr#"$work/"}"
}
expect zb_h1_fsdp "$work/zb_h1_fsdp.yaml:6:3: parallel.fsdp: 2: zb_h1 defers the weight gradients past each block's backward, where FSDP reduce-scatters them: set parallel.fsdp 1 (parallel.dp replicates the stages) or parallel.pp_schedule 1f1b" \
"name: bad
train:
  micro_batch_size: 1
parallel:
  pp: 2
  fsdp: 2
  pp_schedule: zb_h1
"
expect zbv_one_chunk "$work/zbv_one_chunk.yaml:6:3: parallel.pp_virtual_stages: 1: zbv places two chunks on each rank, in a V (rank r runs chunks r and 2 pp - 1 - r): set parallel.pp_virtual_stages 2" \
"name: bad
model:
  num_layers: 6
parallel:
  pp: 2
  pp_virtual_stages: 1
  fsdp: 1
  pp_schedule: zbv
"
expect dualpipev_one_chunk "$work/dualpipev_one_chunk.yaml:6:3: parallel.pp_virtual_stages: 1: dualpipev places two chunks on each rank, in a V (rank r runs chunks r and 2 pp - 1 - r): set parallel.pp_virtual_stages 2" \
"name: bad
model:
  num_layers: 6
parallel:
  pp: 2
  pp_virtual_stages: 1
  fsdp: 1
  pp_schedule: dualpipev
train:
  global_batch_size: 4
  micro_batch_size: 1
"
expect dualpipev_few_micro_batches "$work/dualpipev_few_micro_batches.yaml:3:3: train.global_batch_size: 6 micro batches a step (global_batch_size / (micro_batch_size x data ranks)): dualpipev on parallel.pp 4 needs at least 2 pp = 8 (its warm-up fills both chunks of the V before the first backward): raise train.global_batch_size or lower train.micro_batch_size" \
"name: bad
train:
  global_batch_size: 6
  micro_batch_size: 1
model:
  num_layers: 6
parallel:
  pp: 4
  pp_virtual_stages: 2
  dp: 1
  fsdp: 1
  pp_schedule: dualpipev
"

#!/usr/bin/env bash
# The zero-bubble schedules: parallel.pp_schedule zb_h1 on 4 stages with 8 micro batches (a
# 4-layer model, micro batches of 1), and under TP 2 x PP 2, and zbv (two chunks a rank in a V, a
# 6-layer model for its 8 chunks) on 4 stages with 8 micro batches, give one process's per-step
# losses and gradient norms within 1e-5 over 20 steps and its weights; zb_h1's 4 stages hold at
# most pp = 4 micro batches each; and the recipe check refuses them, exit 2, where their weight
# gradients would come too late (FSDP within a stage) or are not split (experts), or zbv is not
# given its two chunks a rank, naming the key.
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
compare_runs "$work/single6" "$work/zbv"
"${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}" - "$work/zb_h1/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"pp.in_flight_by_stage"' in l]
held = rows[-1]["pp.in_flight_by_stage"]
print(f"zb_h1: micro batches held at once by stage {held}")
assert held == [4, 4, 4, 4], held
PY
grep -o '"pp.in_flight_by_stage":[^]]*]' "$work/zbv/metrics.jsonl" | tail -1 | sed 's/^/zbv: /'

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
expect zb_h1_experts "$work/zb_h1_experts.yaml:12:3: parallel.pp_schedule: zb_h1 splits the backward of dense models only: the 4 experts' GEMMs and their all-to-all have no split backward yet: use 1f1b or interleaved_1f1b" \
"name: bad
train:
  micro_batch_size: 1
model:
  family: qwen3_moe
  num_experts: 4
  num_experts_per_tok: 2
  moe_intermediate_size: 64
parallel:
  pp: 2
  fsdp: 1
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

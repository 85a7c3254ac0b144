#!/usr/bin/env bash
# Muon against AdamW on the demo recipe (recipes/demo.yaml, 0.85M parameters; --recipe another,
# e.g. recipes/moe-demo.yaml), over seeds: each optimizer's peak lr tuned on a small grid at seed
# 0 (lowest final train loss), then the chosen lr over 6 seeds (run.seed: the initial weights and the data order); the final train loss (the
# mean of the last 10 steps' losses) and the held-out loss (builtin:demo-eval, evaluated at the
# last step), mean and spread over the seeds. One process with 1 thread a run, runs one at a time
# (a shared machine); short runs: --steps (default 120) with the demo's warmup and cosine decay
# to a tenth. Muon's Newton-Schulz runs in fp32 (the CPU's bf16 products are slow); its AdamW part
# takes the AdamW lr chosen on the grid (optim.muon.adamw_lr). --stop-at HH:MM (UTC) stops
# starting runs then, and the table says what was measured.
#   scripts/bench/muon_convergence.sh [--steps 120] [--seeds 6] [--stop-at 01:05] [--recipe recipes/demo.yaml]
set -euo pipefail
cd "$(dirname "$0")/../.."
srcdir=$PWD
steps=120 seeds=6 stop_at="" recipe=recipes/demo.yaml
adamw_grid=(1e-3 3e-3 6e-3 1e-2) muon_grid=(0.01 0.02 0.05 0.1 0.2)
while (($#)); do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --stop-at) stop_at=$2; shift 2 ;;
    --recipe) recipe=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
xtrain=${XTRAIN:-$srcdir/build/xtrain}
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
work=${MUON_CONVERGENCE_DIR:-$(mktemp -d)}
mkdir -p "$work"
echo "runs in $work"

late() { [[ -n $stop_at && $(date -u +%H:%M) > $stop_at ]]; }
run() {  # run NAME SEED ARGS...: one process, 1 thread
  local name=$1 seed=$2
  shift 2
  [[ -e $work/$name/done ]] && return 0
  if late; then echo "skipped $name: past $stop_at UTC"; return 0; fi
  OMP_NUM_THREADS=1 "$xtrain" train "$recipe" --set run.dir="$work/$name" --set run.seed="$seed" \
    --set train.steps="$steps" --set optim.warmup_steps=$((steps / 16)) --set train.eval_every="$steps" \
    --set train.log_every=20 --set train.threads=1 --set checkpoint.every=0 "$@" > "$work/$name.log" 2>&1 ||
    { tail -20 "$work/$name.log"; exit 1; }
  touch "$work/$name/done"
  echo "$name: $(grep -o '"eval_loss":[^,]*' "$work/$name/metrics.jsonl" | tail -1)"
}
final() {  # final NAME: the mean loss of the last 10 steps
  "$python" -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if "\"loss\"" in l]; print(sum(x["loss"] for x in r[-10:])/len(r[-10:]))' "$1/metrics.jsonl"
}
best() {  # best PREFIX LR...: the lr of the lowest final train loss at seed 0
  local prefix=$1 lr choice="" low=""
  shift
  for lr in "$@"; do
    [[ -e $work/$prefix-$lr-s0/done ]] || continue
    local value
    value=$(final "$work/$prefix-$lr-s0")
    if [[ -z $low ]] || "$python" -c "import sys; sys.exit(0 if $value < $low else 1)"; then low=$value choice=$lr; fi
  done
  echo "$choice"
}
muon=(--set optim.name=muon --set optim.muon.ns_dtype=fp32)
for lr in "${adamw_grid[@]}"; do run "adamw-$lr-s0" 0 --set optim.lr="$lr" --set optim.min_lr="$(awk "BEGIN{print $lr/10}")"; done
adamw_lr=$(best adamw "${adamw_grid[@]}")
for lr in "${muon_grid[@]}"; do
  run "muon-$lr-s0" 0 "${muon[@]}" --set optim.lr="$lr" --set optim.min_lr="$(awk "BEGIN{print $lr/10}")" \
    --set optim.muon.adamw_lr="$adamw_lr"
done
muon_lr=$(best muon "${muon_grid[@]}")
echo "chosen at seed 0: adamw lr $adamw_lr, muon lr $muon_lr (its AdamW part $adamw_lr)"
for seed in $(seq 1 $((seeds - 1))); do
  run "adamw-$adamw_lr-s$seed" "$seed" --set optim.lr="$adamw_lr" --set optim.min_lr="$(awk "BEGIN{print $adamw_lr/10}")"
  run "muon-$muon_lr-s$seed" "$seed" "${muon[@]}" --set optim.lr="$muon_lr" \
    --set optim.min_lr="$(awk "BEGIN{print $muon_lr/10}")" --set optim.muon.adamw_lr="$adamw_lr"
done
"$python" - "$work" "$adamw_lr" "$muon_lr" "${adamw_grid[*]}" "${muon_grid[*]}" "$seeds" <<'PY'
import json, os, statistics, sys
work, adamw_lr, muon_lr = sys.argv[1:4]
grids = {"adamw": sys.argv[4].split(), "muon": sys.argv[5].split()}
def figures(name):
    folder = f"{work}/{name}"
    if not os.path.exists(f"{folder}/done"):
        return None
    rows = [json.loads(l) for l in open(f"{folder}/metrics.jsonl")]
    train = [r["loss"] for r in rows if "loss" in r][-10:]
    held = [r["eval_loss"] for r in rows if "eval_loss" in r]
    return sum(train) / len(train), held[-1]
print("| optimizer | lr | seed 0: final train loss, held-out loss |")
print("|---|---|---|")
for opt, grid in grids.items():
    for lr in grid:
        f = figures(f"{opt}-{lr}-s0")
        print(f"| {opt} | {lr} | " + (f"{f[0]:.4f}, {f[1]:.4f} |" if f else "not run |"))
print()
print("| optimizer | lr | seeds | final train loss, mean ± sd (min .. max) | held-out loss, mean ± sd (min .. max) |")
print("|---|---|---|---|---|")
for opt, lr in (("adamw", adamw_lr), ("muon", muon_lr)):
    runs = [f for f in (figures(f"{opt}-{lr}-s{s}") for s in range(int(sys.argv[6]))) if f]
    if not runs:
        continue
    cells = []
    for i in (0, 1):
        xs = [r[i] for r in runs]
        sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
        cells.append(f"{statistics.mean(xs):.4f} ± {sd:.4f} ({min(xs):.4f} .. {max(xs):.4f})")
    print(f"| {opt} | {lr} | {len(runs)} | {cells[0]} | {cells[1]} |")
PY

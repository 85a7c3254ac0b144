#!/usr/bin/env bash
# How evenly the experts of recipes/moe-demo.yaml (8 experts, top 2, 4 MoE layers) are loaded over
# its 200 steps, three ways: with the load-balancing loss (the recipe), with the sigmoid router's
# expert bias moved toward balance each step instead (no balancing loss), and with neither. The
# figure is the max/mean expert load of the worst layer of each step (moe.worst_load_ratio in
# metrics.jsonl; 1 is perfect balance, 4 = E/k means two experts take every token), averaged over
# all steps and over the last 50, beside the final training and evaluation losses.
#   scripts/bench/moe-balance.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/bench.sh

run() {
  local name=$1
  shift
  "$xtrain" train recipes/moe-demo.yaml --set run.dir="$work/$name" --set checkpoint.every=0 "$@" \
    > "$work/$name.log" 2>&1 || { cat "$work/$name.log" >&2; exit 1; }
}
run aux_loss
run sigmoid_bias --set model.router=sigmoid_bias --set model.router_aux_loss_coef=0 --set model.router_bias_update_rate=0.001
run neither --set model.router_aux_loss_coef=0

"$python" - "$work" <<'PY'
import json, sys
work = sys.argv[1]
print("| moe-demo, 200 steps | worst layer's max/mean load, mean over steps | over the last 50 | final loss | eval loss |")
print("|---|---|---|---|---|")
for name, label in (("aux_loss", "load-balancing loss 0.01"), ("sigmoid_bias", "sigmoid router, expert bias rate 1e-3"),
                    ("neither", "neither")):
    records = [json.loads(l) for l in open(f"{work}/{name}/metrics.jsonl")]
    steps = [r for r in records if "moe.worst_load_ratio" in r]
    ratios = [r["moe.worst_load_ratio"] for r in steps]
    evals = [r["eval_loss"] for r in records if "eval_loss" in r]
    print(f"| {label} | {sum(ratios) / len(ratios):.2f} | {sum(ratios[-50:]) / 50:.2f} | {steps[-1]['loss']:.4f} | "
          f"{evals[-1]:.4f} |")
PY

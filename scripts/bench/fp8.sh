#!/usr/bin/env bash
# FP8 convergence: trains the demo recipe (dense) and moe-demo (FP8 experts) for 480 steps in
# fp32, bf16 and bf16 with each FP8 scaling (tensorwise, rowwise, blockwise), and compares the
# final training loss (mean of the last 20 steps) and the held-out loss of each against bf16.
# Goal: every FP8 kind within 2% of bf16. Also prints s/step (CPU: the FP8 GEMMs dequantize and
# multiply in fp32, so this is a check of numerics, not of speed).
#   scripts/bench/fp8.sh [--steps N] [--recipes "demo moe-demo"]
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=480
recipes="demo moe-demo"
while (($#)); do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --recipes) recipes=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
bash scripts/build.sh > /dev/null
work=${WORK_DIR:-$(mktemp -d)}
modes="fp32 bf16 tensorwise rowwise blockwise"
for recipe in $recipes; do
  mkdir -p "$work/$recipe"
  for mode in $modes; do
    case $mode in
      fp32) settings=(--set train.dtype=fp32) ;;
      bf16) settings=(--set train.dtype=bf16) ;;
      *) settings=(--set train.dtype=bf16 --set precision.fp8="$mode") ;;
    esac
    # Evaluation at the end only, on the recipe's held-out set.
    build/xtrain train "recipes/$recipe.yaml" --set run.dir="$work/$recipe/$mode" "${settings[@]}" \
      --set train.steps="$steps" --set train.eval_every="$steps" --set checkpoint.every=0 \
      --set checkpoint.resume=never > "$work/$recipe/$mode.log" 2>&1 || { tail -n 20 "$work/$recipe/$mode.log"; exit 1; }
    echo "$recipe $mode: done"
  done
done
"${XTRAIN_PYTHON:-.venv/bin/python3}" - "$work" "$recipes" "$modes" <<'PY'
import json, statistics, sys
work, recipes, modes = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
worst = 0.0
for recipe in recipes:
    rows = {}
    for mode in modes:
        records = [json.loads(l) for l in open(f"{work}/{recipe}/{mode}/metrics.jsonl")]
        train = [r for r in records if "loss" in r]
        evals = [r for r in records if "eval_loss" in r]
        rows[mode] = (statistics.mean(r["loss"] for r in train[-20:]), evals[-1]["eval_loss"],
                      statistics.median(r["step_s"] for r in train))
    base_train, base_eval = rows["bf16"][0], rows["bf16"][1]
    print(f"\n{recipe}, {len(train)} steps\n")
    print("| precision | final train loss (mean of last 20) | vs bf16 | held-out loss | vs bf16 | s/step |")
    print("|---|---|---|---|---|---|")
    for mode, (final, held_out, step_s) in rows.items():
        name = mode if mode in ("fp32", "bf16") else f"bf16 + fp8 {mode}"
        print(f"| {name} | {final:.4f} | {100 * (final / base_train - 1):+.2f}% | {held_out:.4f} | "
              f"{100 * (held_out / base_eval - 1):+.2f}% | {step_s:.3f} |")
        if mode not in ("fp32", "bf16"):
            worst = max(worst, abs(final / base_train - 1), abs(held_out / base_eval - 1))
print(f"\nlargest FP8 difference from bf16 (final or held-out loss): {100 * worst:.2f}% (goal: within 2%)")
PY

#!/usr/bin/env bash
# Trains the demo recipe (recipes/demo.yaml, 480 steps) in fp32, bf16 and fp16 and compares the
# final training loss (mean of the last 20 steps, which smooths batch-to-batch noise) and the
# held-out loss of each against fp32. fp16 also reports its skipped (overflowed) steps.
#   scripts/compare-precision.sh [--steps N]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=480
while (($#)); do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
bash scripts/build.sh > /dev/null
work=${WORK_DIR:-$(mktemp -d)}
for dtype in fp32 bf16 fp16; do
  build/xtrain train recipes/demo.yaml --set run.dir="$work/$dtype" --set train.dtype=$dtype \
    --set train.steps="$steps" --set checkpoint.resume=never > "$work/$dtype.log"
  tail -n 3 "$work/$dtype.log" | head -n 1
done
"${XTRAIN_PYTHON:-.venv/bin/python3}" - "$work" <<'PY'
import json, statistics, sys
work = sys.argv[1]
rows = {}
for dtype in ("fp32", "bf16", "fp16"):
    records = [json.loads(l) for l in open(f"{work}/{dtype}/metrics.jsonl")]
    train = [r for r in records if "loss" in r]
    evals = [r for r in records if "eval_loss" in r]
    rows[dtype] = (statistics.mean(r["loss"] for r in train[-20:]), evals[-1]["eval_loss"],
                   sum(1 for r in train if r.get("skipped")), statistics.median(r["step_s"] for r in train))
base_train, base_eval = rows["fp32"][0], rows["fp32"][1]
print("\n| train.dtype | final train loss (mean of last 20 steps) | vs fp32 | held-out loss | vs fp32 | skipped steps | s/step |")
print("|---|---|---|---|---|---|---|")
for dtype, (train, held_out, skipped, step_s) in rows.items():
    print(f"| {dtype} | {train:.4f} | {100 * (train / base_train - 1):+.2f}% | {held_out:.4f} | "
          f"{100 * (held_out / base_eval - 1):+.2f}% | {skipped} | {step_s:.3f} |")
worst = max(abs(rows[d][0] / base_train - 1) for d in ("bf16", "fp16"))
print(f"\nlargest final-loss difference from fp32: {100 * worst:.2f}% (goal: within 2%)")
PY

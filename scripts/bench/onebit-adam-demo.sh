#!/usr/bin/env bash
# Convergence of 1-bit Adam against AdamW on the demo recipe (recipes/demo.yaml, 480 steps) under
# DDP 2 (`xtrain launch --nproc-per-node 2`, parallel.dp 2, fsdp 1): the final training loss (mean
# of the last 20 steps of metrics.jsonl) and the held-out loss at the last step, 1-bit Adam
# within 2% of AdamW's (the same global batch of 16, 8 a rank). About 2 x 5 minutes on 2 cores.
#   scripts/bench/onebit-adam-demo.sh [--freeze 100] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
srcdir=$PWD
freeze=100 out=
while (($#)); do
  case $1 in
    --freeze) freeze=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
xtrain=${XTRAIN:-$srcdir/build/xtrain}
[[ -x $xtrain ]] || { bash scripts/build.sh > /dev/null; xtrain=$srcdir/build/xtrain; }
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
source tests/integration/lib/distributed.sh
work=${out:-$(mktemp -d)}
mkdir -p "$work"
for optimizer in adamw onebit_adam; do
  rm -rf "${work:?}/$optimizer"
  "$xtrain" launch --nproc-per-node 2 --master-port "$(free_port)" -- train recipes/demo.yaml \
    --set run.dir="$work/$optimizer" --set parallel.dp=2 --set parallel.fsdp=1 --set train.micro_batch_size=8 \
    --set optim.name="$optimizer" --set optim.freeze_step="$freeze" > "$work/$optimizer.log" 2>&1 ||
    { tail -n 30 "$work/$optimizer.log"; exit 1; }
done
"$python" - "$work" <<'PY'
import json, sys
work = sys.argv[1]
def figures(name):
    records = [json.loads(line) for line in open(f"{work}/{name}/metrics.jsonl")]
    losses = [r["loss"] for r in records if "loss" in r and "eval_loss" not in r]
    evals = [r["eval_loss"] for r in records if "eval_loss" in r]
    return sum(losses[-20:]) / 20, evals[-1], sum(r.get("step_s", 0) for r in records)
a, b = figures("adamw"), figures("onebit_adam")
print("optimizer    | train loss (mean of last 20) | held-out loss | seconds")
for name, f in (("adamw", a), ("onebit_adam", b)):
    print(f"{name:<12} | {f[0]:.4f}                       | {f[1]:.4f}        | {f[2]:.0f}")
train_diff, eval_diff = (b[0] - a[0]) / a[0], (b[1] - a[1]) / a[1]
print(f"1-bit Adam against AdamW: train {train_diff:+.2%}, held-out {eval_diff:+.2%}")
ok = abs(train_diff) <= 0.02 and abs(eval_diff) <= 0.02
print("within 2%" if ok else "NOT within 2%")
sys.exit(0 if ok else 1)
PY

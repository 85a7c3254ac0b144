#!/usr/bin/env bash
# bf16 training on a CPU without fast bf16 GEMMs: the demo recipe (recipes/demo.yaml) in bf16 with
# ATen's own bf16 GEMMs (XTRAIN_CPU_BF16_GEMM=aten) against the same GEMMs widened to fp32
# (model/kernels/widened_gemm.h), with fp32 training beside them; seconds a step (median of steps
# 6..STEPS) and the loss at the last step of each, in one invocation.
#   scripts/bench/cpu-bf16-gemm.sh [--steps 20]
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=20
while (($#)); do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
bash scripts/build.sh > /dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() {  # NAME DTYPE GEMM
  XTRAIN_CPU_BF16_GEMM=$3 build/xtrain train recipes/demo.yaml --set run.dir="$work/$1" --set train.dtype="$2" \
    --set train.steps="$steps" --set train.eval_every=0 --set checkpoint.every=0 --set checkpoint.resume=never \
    > "$work/$1.log" 2>&1 || { tail -n 20 "$work/$1.log"; exit 1; }
}
run fp32 fp32 auto
run bf16-aten bf16 aten
run bf16-widened bf16 widened
grep -m1 "model name" /proc/cpuinfo | sed 's/.*: /cpu: /'
"${XTRAIN_PYTHON:-.venv/bin/python3}" - "$work" <<'PY'
import json, statistics, sys
work = sys.argv[1]
rows = {}
for name in ("fp32", "bf16-aten", "bf16-widened"):
    records = [json.loads(line) for line in open(f"{work}/{name}/metrics.jsonl") if '"step_s"' in line]
    rows[name] = (statistics.median(r["step_s"] for r in records[5:]), records[-1]["loss"])
print("run          | s/step  | last loss")
for name, (seconds, loss) in rows.items():
    print(f"{name:<12} | {seconds:7.3f} | {loss:.6f}")
print(f"bf16 widened against ATen's bf16 GEMMs: {rows['bf16-aten'][0] / rows['bf16-widened'][0]:.1f}x faster")
PY

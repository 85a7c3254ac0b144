#!/usr/bin/env bash
# bf16 training on the GPU follows fp32 training on the GPU, and fp32 on the GPU follows fp32 on
# the CPU: the per-step losses of the same recipe agree within 2e-2 (bf16) and 1e-4 (fp32,
# different kernels) relative over 20 steps. Skips (77) without a CUDA device.
set -euo pipefail
xtrain=$1
source_dir=$2
if ! "$xtrain" --version | grep -qE "compiled, [0-9]+ devices? \("; then
  echo "skip: no CUDA device visible"
  exit 77
fi
python=${XTRAIN_PYTHON:-$source_dir/.venv/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() {  # run NAME SETTINGS...
  "$xtrain" train "$source_dir/recipes/demo.yaml" --set run.dir="$work/$1" --set train.steps=20 \
    --set train.log_every=5 --set checkpoint.every=0 "${@:2}" > "$work/$1.log"
}
run cpu-fp32 --set train.device=cpu --set train.dtype=fp32
run cuda-fp32 --set train.device=cuda --set train.dtype=fp32
run cuda-bf16 --set train.device=cuda --set train.dtype=bf16
"$python" - "$work" <<'PY'
import json, sys
work = sys.argv[1]
def losses(name):
    return [r["loss"] for r in map(json.loads, open(f"{work}/{name}/metrics.jsonl")) if "loss" in r]
cpu, fp32, bf16 = losses("cpu-fp32"), losses("cuda-fp32"), losses("cuda-bf16")
assert len(cpu) == len(fp32) == len(bf16) == 20, (len(cpu), len(fp32), len(bf16))
worst_fp32 = max(abs(a - b) / abs(a) for a, b in zip(cpu, fp32))
worst_bf16 = max(abs(a - b) / abs(a) for a, b in zip(fp32, bf16))
print(f"cuda fp32 vs cpu fp32: worst relative loss difference {worst_fp32:.2e} (limit 1e-4)")
print(f"cuda bf16 vs cuda fp32: worst relative loss difference {worst_bf16:.2e} (limit 2e-2)")
assert worst_fp32 < 1e-4 and worst_bf16 < 2e-2
PY
echo "bf16 parity: ok"

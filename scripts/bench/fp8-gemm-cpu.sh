#!/usr/bin/env bash
# The CPU's FP8 GEMM choices for one tensorwise product (LibTorch 2.11 has a CPU _scaled_mm for
# tensorwise operands only): _scaled_mm against dequantize + fp32 matmul (what xtrain runs on the
# CPU) and a plain fp32 matmul, on the same operands, one thread, median of 7, with the largest
# difference between the two FP8 products. Ratios are what to compare; the seconds vary by CPU.
#   scripts/bench/fp8-gemm-cpu.sh [SIZE]   (default 1024: SIZE x SIZE times SIZE x SIZE)
set -euo pipefail
cd "$(dirname "$0")/../.."
"${XTRAIN_PYTHON:-.venv/bin/python3}" - "${1:-1024}" <<'PY'
import statistics, sys, time
import torch
torch.set_num_threads(1)
n = int(sys.argv[1])
torch.manual_seed(0)
a, b = torch.randn(n, n), torch.randn(n, n)
def quantize(x):
    scale = (448.0 / x.abs().max().double()).float()
    return (x * scale).clamp(-448, 448).to(torch.float8_e4m3fn), scale
qa, sa = quantize(a)
qb_t, sb = quantize(b.t().contiguous())
qb = qb_t.t()  # column-major, as _scaled_mm takes its second operand
def scaled_mm():
    return torch._scaled_mm(qa, qb, scale_a=sa.reciprocal(), scale_b=sb.reciprocal(), out_dtype=torch.float32)
def dequantized():
    return torch.mm(qa.float() / sa, qb.float() / sb)
def fp32():
    return torch.mm(a, b)
def median_seconds(f):
    f()
    times = []
    for _ in range(7):
        start = time.perf_counter(); f(); times.append(time.perf_counter() - start)
    return statistics.median(times)
t = {name: median_seconds(f) for name, f in (("_scaled_mm", scaled_mm), ("dequantize + fp32 mm", dequantized), ("fp32 mm", fp32))}
diff = ((scaled_mm() - dequantized()).abs().max() / dequantized().abs().max()).item()
print(f"{n} x {n} x {n}, one thread:")
for name, seconds in t.items():
    print(f"  {name:22s} {seconds * 1e3:8.1f} ms  ({seconds / t['fp32 mm']:.2f}x fp32 mm)")
print(f"  _scaled_mm / dequantize: {t['_scaled_mm'] / t['dequantize + fp32 mm']:.2f}x; largest difference of the two products {diff:.1e} (relative)")
PY

#!/usr/bin/env bash
# Where a training step's CPU time goes: `perf record` over xtrain training recipes/bench-cpu.yaml
# (fp32), once with memory.fused_kernels off and once on auto, each sample's symbol put in a
# group (matmul, the elementwise ops by name, reductions, attention, the optimizer's ops, ...),
# and a table of each group's share of the samples, side by side.
#   scripts/bench/profile.sh [--steps N] [--recipe FILE]   (needs perf: Debian's linux-perf)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD_DIR:-build}
steps=30
recipe=recipes/bench-cpu.yaml
while (($#)); do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --recipe) recipe=$2; shift 2 ;;
    *) echo "profile.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
command -v perf > /dev/null || { echo "profile.sh: perf is missing (apt-get install linux-perf)" >&2; exit 2; }
[[ -x $build/xtrain ]] || { echo "profile.sh: $build/xtrain is missing (scripts/build.sh)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for fused in off auto; do
  perf record -q -F 499 -o "$work/$fused.data" -- "$build/xtrain" train "$recipe" --set run.dir="$work/run-$fused" \
    --set train.steps="$steps" --set memory.fused_kernels=$fused > "$work/$fused.log" 2>&1
  perf report -i "$work/$fused.data" --no-children --sort dso,symbol --stdio 2> /dev/null |
    awk '/^ +[0-9.]+%/ { share = $1; sub(/%/, "", share); $1 = ""; print share "\t" $0 }' > "$work/$fused.tsv"
done

"${XTRAIN_PYTHON:-.venv/bin/python3}" - "$work/off.tsv" "$work/auto.tsv" <<'PY'
import re, sys

# First match wins; the patterns read ATen's and MKL's symbol names.
GROUPS = [
    ("matmul (MKL sgemm and its packing)", r"mkl_blas|sgemm|gemm|gblock_by_k"),
    ("OpenMP threads waiting (libgomp)", r"libgomp"),
    ("attention kernel", r"flash_attention|_scaled_dot_product"),
    ("fused RMSNorm, add + RMSNorm", r"normalize_rows"),
    ("fused SwiGLU", r"swiglu_elements"),
    ("fused rotary", r"rotate_row"),
    ("fused AdamW", r"adamw_loop|adamw_elements"),
    ("optimizer (addcmul, addcdiv, lerp, sqrt)", r"addcmul|addcdiv|lerp_kernel|sqrt_kernel"),
    ("elementwise mul", r"mul_kernel"),
    ("elementwise add/sub", r"add_kernel|sub_kernel|add_clamp"),
    ("elementwise div", r"div_true_kernel|div_kernel|reciprocal"),
    ("SiLU, sigmoid and exp", r"silu|sigmoid|Sleef_.*exp|exp_kernel"),
    ("rsqrt and pow", r"rsqrt|pow_tensor|pow_kernel"),
    ("reductions (sum, mean, max)", r"_sum|reduce|mean_kernel|max_kernel|norm_kernel"),
    ("copies and casts", r"copy_kernel|copy_|direct_copy|memcpy|memmove|cat_serial|index_"),
    ("fill and zero", r"fill_kernel|memset|zero_"),
    ("log-softmax and cross-entropy", r"log_softmax|softmax|nll_loss|cross_entropy"),
    ("memory allocation", r"malloc|free|alloc|mmap|munmap|page_fault|clear_page"),
    ("TensorIterator loops and op dispatch", r"serial_for_each|TensorIterator|Dispatcher|c10::impl|OperatorHandle"),
    ("operating system (other kernel time)", r"\[kernel"),
]

def shares(path):
    groups = {}
    for line in open(path):
        share, symbol = line.rstrip("\n").split("\t", 1)
        name = next((g for g, pattern in GROUPS if re.search(pattern, symbol)), "other")
        groups[name] = groups.get(name, 0.0) + float(share)
    return groups

off, auto = shares(sys.argv[1]), shares(sys.argv[2])
names = [g for g, _ in GROUPS] + ["other"]
print("| group | share of the step, fused_kernels off | share, fused_kernels auto |")
print("|---|---|---|")
for name in names:
    a, b = off.get(name, 0.0), auto.get(name, 0.0)
    if a >= 0.05 or b >= 0.05:
        print(f"| {name} | {a:.1f}% | {b:.1f}% |")
PY
for fused in off auto; do
  tokens=$(grep -o '"tokens_per_s":[0-9.]*' "$work/run-$fused/metrics.jsonl" | tail -n +3 | cut -d: -f2 | sort -n |
    awk '{ v[NR] = $1 } END { printf "%.0f", v[int((NR + 1) / 2)] }')
  echo "fused_kernels $fused: median tokens/s ${tokens} (steps 5 on, under perf)"
done

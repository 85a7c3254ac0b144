#!/usr/bin/env bash
# Peak memory and time of one causal-attention forward + backward (tools/bench/bench_attention),
# LibTorch's fused scaled_dot_product_attention (sdpa, fp32 and bf16), blockwise and naive, at
# growing sequence lengths: B=1, D=64, blocks of 256, blockwise in fp32 and in bf16 (bf16 tile
# matmuls, fp32 softmax statistics), naive in fp32; 8 query
# heads over 4 kv heads, except at 64K where a single head keeps the run within minutes on 2
# cores (time and memory there scale linearly with the number of heads).
# Every variant runs in its own process, so each peak RSS is that variant's alone. The naive
# path materialises [B, H, T, T] fp32 tensors (scores, probabilities, their gradients), so it
# runs only where its estimated need fits the budget; otherwise the estimate is printed.
# --seqs picks the lengths (4096, 16384 and 65536; 65536 runs with one head) and --dtypes the
# dtypes of the sdpa and blockwise variants (fp32, bf16; bf16 only where the CPU has native
# bf16, or it takes hours).
#   scripts/bench/attention.sh [--budget-gib N] [--threads N] [--seqs "4096 16384"] [--dtypes "fp32 bf16"]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD_DIR:-build}
budget_gib=8
threads=$(nproc)
seqs="4096 16384 65536"
dtypes="fp32 bf16"
while (($#)); do
  case $1 in
    --budget-gib) budget_gib=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --seqs) seqs=$2; shift 2 ;;
    --dtypes) dtypes=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target bench_attention >/dev/null
bench=$build/tools/bench/bench_attention
export OMP_NUM_THREADS=$threads
results=$(mktemp)
trap 'rm -f "$results"' EXIT

# Live [B, H, T, T] fp32 tensors at the naive path's peak (measured: ~3 at T=4096, in backward).
naive_tensors=3
for seq in $seqs; do
  heads=8 kv_heads=4
  ((seq < 65536)) || heads=1 kv_heads=1
  args=(--seq "$seq" --heads "$heads" --kv-heads "$kv_heads" --head-dim 64 --block-size 256 --threads "$threads")
  for dtype in $dtypes; do
    "$bench" --impl sdpa --dtype "$dtype" "${args[@]}" >>"$results"
    "$bench" --impl blockwise --dtype "$dtype" "${args[@]}" >>"$results"
  done
  need_gib=$(awk -v h="$heads" -v t="$seq" -v n="$naive_tensors" 'BEGIN { printf "%.1f", n * h * t * t * 4 / 2^30 }')
  if awk -v need="$need_gib" -v budget="$budget_gib" 'BEGIN { exit !(need <= budget) }'; then
    "$bench" --impl naive "${args[@]}" >>"$results"
  else
    printf '{"impl": "naive", "dtype": "fp32", "seq": %d, "heads": %d, "head_dim": 64, "skipped": "needs ~%s GiB > budget %s GiB"}\n' \
      "$seq" "$heads" "$need_gib" "$budget_gib" >>"$results"
  fi
done

cat "$results"
"${XTRAIN_PYTHON:-.venv/bin/python3}" - "$results" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print(f"\n{'impl':<10} {'dtype':<5} {'seq':>6} {'heads':>5} {'head_dim':>8} {'peak_rss_mib':>12} {'seconds':>8}")
for r in rows:
    if "skipped" in r:
        print(f"{r['impl']:<10} {r['dtype']:<5} {r['seq']:>6} {r['heads']:>5} {r['head_dim']:>8}  skipped: {r['skipped']}")
    else:
        print(f"{r['impl']:<10} {r['dtype']:<5} {r['seq']:>6} {r['heads']:>5} {r['head_dim']:>8} {r['peak_rss_mib']:>12.0f} {r['seconds']:>8.2f}")
PY

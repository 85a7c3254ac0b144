#!/usr/bin/env bash
# Runs one forward + backward of the output-projection cross-entropy with full logits and with
# chunked logits (memory::chunked_cross_entropy), each in its own process so that each peak RSS
# belongs to one variant, and prints both peaks, times and the peak ratio (full / chunked).
# Defaults: 8192 tokens x vocab 131072 x hidden 1024, fp32; the full variant needs ~12 GiB.
#   scripts/bench/chunked-loss.sh [--build DIR] [any bench_chunked_loss option, e.g. --vocab 32768]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build
args=()
while (($#)); do
  case $1 in
    --build) build=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
if [[ $build == build ]]; then bash scripts/build.sh >/dev/null; else cmake --build "$build" --target bench_chunked_loss >/dev/null; fi

full=$("$build/tools/bench/bench_chunked_loss" --impl full "${args[@]}")
chunked=$("$build/tools/bench/bench_chunked_loss" --impl chunked "${args[@]}")

"${XTRAIN_PYTHON:-.venv/bin/python3}" - "$full" "$chunked" <<'PY'
import json, sys
full, chunked = (json.loads(line) for line in sys.argv[1:3])
print(f"tokens {full['tokens']}  vocab {full['vocab']}  hidden {full['hidden']}  fp32")
print(f"{'variant':<10}{'chunk':>8}{'loss':>12}{'peak MiB':>12}{'seconds':>10}")
for run in (full, chunked):
    print(f"{run['impl']:<10}{run['chunk_tokens']:>8}{run['loss']:>12.6f}{run['peak_rss_mib']:>12.1f}{run['seconds']:>10.3f}")
ratio = full['peak_rss_mib'] / max(chunked['peak_rss_mib'], 1e-9)
print(f"peak memory ratio full / chunked: {ratio:.1f}x (goal >= 8x)")
PY

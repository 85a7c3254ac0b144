#!/usr/bin/env bash
# Rollout tokens/s: xtrain's batched sampler with its key/value cache (train/rollout_sampler.h,
# tools/bench/bench_rollout) against transformers' generate(do_sample=True) on the same random
# Llama folder (tools/reference/rollout_hf.py), the same B prompts of P random ids, N new tokens
# each (no EOS, so every row runs to N), the same number of torch threads, back to back.
# Both are fp32 on the CPU, each after a short warm-up.
#   scripts/bench/rollout.sh [--batch 16] [--prompt-tokens 32] [--new-tokens 64] [--threads N]
#                            [--hidden 512] [--layers 8] [--vocab 32000]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD_DIR:-build}
python=${XTRAIN_PYTHON:-.venv/bin/python3}
batch=16 prompt_tokens=32 new_tokens=64 threads=$(nproc) hidden=512 layers=8 vocab=32000
while (($#)); do
  case $1 in
    --batch) batch=$2; shift 2 ;;
    --prompt-tokens) prompt_tokens=$2; shift 2 ;;
    --new-tokens) new_tokens=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --hidden) hidden=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    --vocab) vocab=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
cmake --build "$build" --target bench_rollout >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" tools/reference/rollout_hf.py bench-model --out "$work/model" --vocab "$vocab" --hidden "$hidden" \
  --layers "$layers" --heads 8 --kv-heads 4 >/dev/null 2>&1
export OMP_NUM_THREADS=$threads
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "llama hidden $hidden, $layers layers, vocab $vocab, fp32; batch $batch x $prompt_tokens prompt tokens," \
  "$new_tokens new tokens; $threads threads on $cpu"
args=(--batch "$batch" --prompt-tokens "$prompt_tokens" --new-tokens "$new_tokens" --threads "$threads")
xtrain_line=$("$build/tools/bench/bench_rollout" --model "$work/model" "${args[@]}")
hf_line=$("$python" tools/reference/rollout_hf.py bench --model "$work/model" "${args[@]}" 2>/dev/null | tail -1)
rate() { awk '{printf "%.1f", $2 / $5}' <<<"$1"; }
x=$(rate "$xtrain_line") h=$(rate "$hf_line")
echo "$xtrain_line: $x tokens/s"
echo "$hf_line: $h tokens/s"
awk -v x="$x" -v h="$h" 'BEGIN {printf "xtrain / transformers: %.2f\n", x / h}'

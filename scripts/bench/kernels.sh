#!/usr/bin/env bash
# Each fused kernel against the unfused ops it replaces (tools/bench/bench_kernels): forward and
# forward + backward on fp32 tensors of rows tokens, alternating the two in one process, medians
# of the rounds and the unfused / fused ratios, one JSON line per kernel and width.
#   scripts/bench/kernels.sh [--rows N] [--widths "256 768 2048"] [--kernels "rms_norm add_rms_norm swiglu rotary adamw"]
#                            [--rounds N] [--threads N]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD_DIR:-build}
args=()
while (($#)); do
  case $1 in
    --widths) read -ra widths <<< "$2"; args+=(--widths "${widths[@]}"); shift 2 ;;
    --kernels) read -ra kernels <<< "$2"; args+=(--kernels "${kernels[@]}"); shift 2 ;;
    --rows | --rounds | --threads) args+=("$1" "$2"); shift 2 ;;
    *) echo "kernels.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -x $build/tools/bench/bench_kernels ]] || cmake --build "$build" --target bench_kernels
"$build/tools/bench/bench_kernels" "${args[@]}"

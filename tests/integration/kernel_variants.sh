#!/usr/bin/env bash
# Other machines, simulated on this one. MKL and ATen pick their kernels by CPU, and the thread
# count changes the order of reductions, so a user's machine rounds differently from ours. The
# golden tests against transformers (two families, dense and mixture of experts) and the in-process
# layout-parity tests run once per machine simulated below:
#   - an AVX2 machine (the AMD EPYC kind): MKL_ENABLE_INSTRUCTIONS=AVX2 and ATEN_CPU_CAPABILITY=avx2,
#     where the CPU has AVX-512 (elsewhere that is the baseline);
#   - an old machine: MKL_ENABLE_INSTRUCTIONS=SSE4_2 and ATEN_CPU_CAPABILITY=default;
#   - one thread (OMP_NUM_THREADS=1; the baseline runs 2).
# XTRAIN_KERNEL_VARIANTS=each runs each of the five settings alone instead (the table in docs/results.md).
# The machine's own best paths are the baseline. Every variant must pass, and must be seen to reach
# the process: the golden tests report the ATen capability and thread count they ran with, which
# must be the ones asked for, and a setting of MKL's instructions (which no report shows) must move
# at least one figure of the golden report from the baseline's. The thread count need not move a
# figure: the golden shapes are small enough that ATen and MKL may run them on one thread anyway.
# Prints one row per variant.
set -euo pipefail
xtrain=$1
unit_tests=$(dirname "$xtrain")/tests/xtrain_unit_tests
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work XTRAIN_GOLDEN_FAMILIES=qwen3,qwen3_moe
# The references (transformers through build/test-python) run on this machine's own kernels in
# every variant, as in the baseline: a variant moves xtrain's figures alone, and under
# scripts/test.sh the references fork from the suite's interpreter (a variable read at import
# would send each to an interpreter of its own).
export XTRAIN_TEST_PYTHON_UNSET="OMP_NUM_THREADS MKL_ENABLE_INSTRUCTIONS ATEN_CPU_CAPABILITY"
golden_filter="[golden]~[bert]~[llava]~[vit]~[t5]~[clip]"
parity_filter="[parallel],[fsdp],[tp]"

variants=("MKL_ENABLE_INSTRUCTIONS=SSE4_2 ATEN_CPU_CAPABILITY=default" "OMP_NUM_THREADS=1")
if grep -qw avx512f /proc/cpuinfo; then
  variants=("MKL_ENABLE_INSTRUCTIONS=AVX2 ATEN_CPU_CAPABILITY=avx2" "${variants[@]}")
fi
if [[ ${XTRAIN_KERNEL_VARIANTS:-} == each ]]; then  # every setting on its own, for the table in docs/results.md
  variants=("MKL_ENABLE_INSTRUCTIONS=SSE4_2" "ATEN_CPU_CAPABILITY=default" "OMP_NUM_THREADS=1")
  grep -qw avx512f /proc/cpuinfo && variants+=("MKL_ENABLE_INSTRUCTIONS=AVX2" "ATEN_CPU_CAPABILITY=avx2")
fi

# run NAME [VAR=VALUE...]: the golden and parity tests under one setting; the golden report's lines
# (the figures, without the per-run scratch paths) go to $work/NAME.figures.
run() {
  local name=$1
  shift
  if ! env OMP_NUM_THREADS=2 "$@" "$unit_tests" "$golden_filter" > "$work/$name.golden" 2>&1; then
    cat "$work/$name.golden"
    echo "kernel_variants: the golden tests failed under ${*:-the baseline}" >&2
    return 1
  fi
  if ! env OMP_NUM_THREADS=2 "$@" "$unit_tests" "$parity_filter" > "$work/$name.parity" 2>&1; then
    cat "$work/$name.parity"
    echo "kernel_variants: the layout-parity tests failed under ${*:-the baseline}" >&2
    return 1
  fi
  grep "^golden parity" "$work/$name.golden" > "$work/$name.figures"
}

# reached NAME VAR=VALUE...: fails unless the golden run reported what each setting asks of ATen.
reached() {
  local name=$1 setting reported
  shift
  reported=$(grep -m1 "^golden kernels:" "$work/$name.golden") ||
    { echo "kernel_variants: the golden tests reported no kernel line under $*" >&2; return 1; }
  for setting in "$@"; do
    case $setting in
      ATEN_CPU_CAPABILITY=*)
        grep -qi "capability ${setting#*=}," <<< "$reported" ||
          { echo "kernel_variants: $setting did not reach ATen: $reported" >&2; return 1; } ;;
      OMP_NUM_THREADS=*)
        grep -q "intra-op threads ${setting#*=}$" <<< "$reported" ||
          { echo "kernel_variants: $setting did not reach ATen: $reported" >&2; return 1; } ;;
    esac
  done
}

# row NAME LABEL: the worst share of the weights' tolerance and the worst gradient error.
row() {
  local figures=$work/$1.figures shares gradients parity
  shares=$(grep -o 'at most [0-9]*% (max) and [0-9]*% (rms)' "$figures" |
    awk '{gsub("%", ""); if ($3 > m) m = $3; if ($6 > r) r = $6} END {printf "%3d%% max, %3d%% rms", m, r}')
  gradients=$(grep -o 'gradients [0-9.e+-]*' "$figures" | awk '{if ($2 > g) g = $2} END {printf "%.2e", g}')
  parity=$(grep -o 'All tests passed ([0-9]* assertions in [0-9]* test cases)' "$work/$1.parity")
  printf '%-52s | %-20s | %-9s | %-8s | %s\n' "$2" "$shares" "$gradients" "$(grep -c . "$figures")" "$parity"
}

printf '%-52s | %-20s | %-9s | %-8s | %s\n' "setting" "weights: tolerance" "gradients" "figures" "layout parity"
run baseline
reached baseline OMP_NUM_THREADS=2
row baseline "baseline (machine's own, 2 threads)"
for variant in "${variants[@]}"; do
  name=${variant//[= _]/-}
  read -ra settings <<< "$variant"
  run "$name" "${settings[@]}"
  reached "$name" "${settings[@]}"
  row "$name" "$variant"
  if ! cmp -s "$work/baseline.figures" "$work/$name.figures"; then
    echo "  $variant: golden figures moved from the baseline's"
  elif [[ $variant == *MKL_ENABLE_INSTRUCTIONS=* ]]; then
    echo "kernel_variants: $variant moved no figure of the golden report; the setting did not reach MKL" >&2
    exit 1
  else
    echo "  $variant: reached ATen; golden figures the same as the baseline's at these shapes"
  fi
done
echo "kernel variants: ok, ${#variants[@]} settings besides the baseline, each reaching the kernels and passing"

#!/usr/bin/env bash
# The parity and golden checks catch a slightly broken engine. Each numeric fault of
# XTRAIN_NUMERIC_FAULT (lib/util/numeric_fault.h) perturbs one computation by a small amount; the
# check that guards it must then fail by exceeding its tolerance, not by a crash:
#   - the distributed faults: FSDP 2 with the fault against one process without it, compared by
#     distributed_parity.sh's compare_runs (losses and gradient norms 1e-5 relative, weights 1e-5
#     absolute), on distributed_parity.sh's recipe;
#   - rope_shift, which every layout computes alike: the golden test against transformers;
#   - adamw_decay, adamw_beta2 and adamw_eps (AdamW's weight decay x 1.01, beta2 0.95 -> 0.955,
#     eps x 10): the golden test's weights after its AdamW steps, held against the float64
#     trajectory, and the 100-step comparison with LibTorch's torch::optim::AdamW.
# Prints one row per fault: the check, the largest difference and its tolerance.
set -euo pipefail
xtrain=$1
srcdir=$2
unit_tests=$(dirname "$xtrain")/tests/xtrain_unit_tests
source "$srcdir/tests/integration/lib/distributed.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work
write_recipe "$work/recipe.yaml" 20

# refused VALUE MESSAGE: a fault that is malformed or names nothing exits 2 with MESSAGE before
# the run folder exists; a silent no-op would pass here as a fault the checks miss.
refused() {
  local status=0 stderr
  stderr=$(XTRAIN_NUMERIC_FAULT=$1 "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/refused" 2>&1 >/dev/null) || status=$?
  [[ $status == 2 && $stderr == *"$2" && ! -e $work/refused ]] || {
    echo "numeric_faults: XTRAIN_NUMERIC_FAULT=$1 gave exit $status: $stderr (expected exit 2: $2)" >&2
    return 1
  }
}
refused grad_scale:0:model.layers.9.mlp.up_proj.weight \
  "XTRAIN_NUMERIC_FAULT=grad_scale:0:model.layers.9.mlp.up_proj.weight: the model has no parameter of that name (e.g. model.embed_tokens.weight)"
refused rope_shfit "XTRAIN_NUMERIC_FAULT=rope_shfit: unknown fault 'rope_shfit' (expected grad_scale:<rank>:<parameter>, rope_shift, skip_reduce_scatter:<unit>, grad_divisor:<rank>, drop_micro_batch:<rank>, adamw_decay, adamw_beta2, adamw_eps, muon_piece or local_negatives)"
XTRAIN_NUMERIC_FAULT=skip_reduce_scatter:model.layers.7 "$xtrain" launch --nproc-per-node 2 --master-port "$(free_port)" -- \
  train "$work/recipe.yaml" --set run.dir="$work/refused" > "$work/refused.log" 2>&1 && exit 1
grep -q "XTRAIN_NUMERIC_FAULT=skip_reduce_scatter:model.layers.7: no FSDP unit has that name (units: model.embed_tokens, model.layers.0, model.layers.1, head)" "$work/refused.log" || {
  cat "$work/refused.log"
  exit 1
}

reference single

# fault_caught_by_parity NAME FAULT LAYOUT [args...]: trains LAYOUT (2 ranks: FSDP 2, or DDP 2
# with --set parallel.dp=2 ...) under FAULT, expects compare_runs against the single process to
# fail on a tolerance, and prints the figures.
fault_caught_by_parity() {
  local name=$1 fault=$2 layout=$3
  shift 3
  XTRAIN_NUMERIC_FAULT=$fault train "$name" 2 "$@"
  grep -q "XTRAIN_NUMERIC_FAULT=$fault: this run computes wrong numbers on purpose" "$work/$name.log"
  if compare_runs "$work/single" "$work/$name" > "$work/$name.compare" 2>&1; then
    cat "$work/$name.compare"
    echo "numeric_faults: $fault was not caught by the parity check" >&2
    return 1
  fi
  # Caught means a tolerance was exceeded: the figures line, then the assertion that failed.
  grep -q "max loss difference" "$work/$name.compare" && grep -q "^AssertionError" "$work/$name.compare" || {
    cat "$work/$name.compare"
    echo "numeric_faults: the parity check failed on $fault without exceeding a tolerance" >&2
    return 1
  }
  printf '%-50s parity, %-6s %s\n' "$fault" "$layout" "$(grep -o 'max loss.*' "$work/$name.compare")"
}

ddp=(--set parallel.dp=2 --set parallel.fsdp=1)
fault_caught_by_parity grad_scale "grad_scale:1:lm_head.weight" "FSDP 2"
fault_caught_by_parity grad_scale_ddp "grad_scale:1:lm_head.weight" "DDP 2" "${ddp[@]}"
fault_caught_by_parity skip_reduce_scatter "skip_reduce_scatter:model.layers.0" "FSDP 2"
fault_caught_by_parity grad_divisor "grad_divisor:1" "FSDP 2"
fault_caught_by_parity drop_micro_batch "drop_micro_batch:1" "FSDP 2"

# The golden test passes without the fault and fails on a tolerance with it. rope_shift moves every
# family's logits alike, so llama's case shows it (ctest runs every family without the fault).
export XTRAIN_GOLDEN_FAMILIES=llama
"$unit_tests" "[golden]~[bert]~[llava]~[vit]~[t5]~[clip]" > "$work/golden.log" 2>&1 || { cat "$work/golden.log"; exit 1; }
if XTRAIN_NUMERIC_FAULT=rope_shift "$unit_tests" "[golden]~[bert]~[llava]~[vit]~[t5]~[clip]" > "$work/golden_rope.log" 2>&1; then
  cat "$work/golden_rope.log"
  echo "numeric_faults: rope_shift was not caught by the golden test" >&2
  exit 1
fi
# Catch2 prints the failed check, "with expansion:" and the values compared ("0.0027 < 0.00001").
figure=$(grep -m1 -A2 "CHECK( logits_error < 1e-5 )" "$work/golden_rope.log" | tail -1 | xargs) || true
[[ $figure == *"< 0.00001" ]] || { cat "$work/golden_rope.log"; echo "numeric_faults: rope_shift failed the golden test elsewhere than its logits check" >&2; exit 1; }
printf '%-50s golden         logits max relative error %s (the tolerance)\n' rope_shift "$figure"

# The optimizer faults: the golden test's weight check (the distance from the float64 trajectory
# after its AdamW steps, at the bounds it holds every family to) and the 100-step comparison with
# torch::optim::AdamW must each fail on a tolerance: a weight check (or a parameter or moment
# check) among the failed ones, and the test's figures line. Catch2 prints each failed check
# with its text.
"$unit_tests" "[adamw]" > "$work/adamw.log" 2>&1 || { cat "$work/adamw.log"; exit 1; }
# caught_by LOG WHAT FIGURES CHECK...: LOG shows one of the CHECKs failed, and has a FIGURES line.
caught_by() {
  local log=$1 what=$2 figures=$3 check
  shift 3
  for check in "$@"; do
    if grep -qF "CHECK( $check )" "$log" && grep -q "$figures" "$log"; then return 0; fi
  done
  cat "$log"
  echo "numeric_faults: $fault failed $what elsewhere than its checks ($*)" >&2
  exit 1
}
for fault in adamw_decay adamw_beta2 adamw_eps; do
  if XTRAIN_NUMERIC_FAULT=$fault "$unit_tests" "[golden]~[bert]~[llava]~[vit]~[t5]~[clip]" > "$work/golden_$fault.log" 2>&1; then
    cat "$work/golden_$fault.log"
    echo "numeric_faults: $fault was not caught by the golden test" >&2
    exit 1
  fi
  caught_by "$work/golden_$fault.log" "the golden test" "xtrain takes at most" \
    "xtrain.max_abs <= tolerance.max_abs" "xtrain.rms <= tolerance.rms"
  printf '%-50s golden         weights (llama, untied, unfused): %s\n' "$fault" \
    "$(grep -m1 -o "xtrain takes at most .* of its tolerance" "$work/golden_$fault.log" | sed 's/xtrain //')"
  if XTRAIN_NUMERIC_FAULT=$fault "$unit_tests" "[adamw]" > "$work/adamw_$fault.log" 2>&1; then
    cat "$work/adamw_$fault.log"
    echo "numeric_faults: $fault was not caught by the comparison with torch::optim::AdamW" >&2
    exit 1
  fi
  caught_by "$work/adamw_$fault.log" "the comparison with torch::optim::AdamW" "AdamW against torch::optim::AdamW" \
    "error <= 1e-6" "exp_avg_error <= 1e-6" "exp_avg_sq_error <= 1e-6"
  printf '%-50s torch AdamW    %s\n' "$fault" \
    "$(grep -m1 -o "(unfused), 100 steps: .*max relative" "$work/adamw_$fault.log")"
done

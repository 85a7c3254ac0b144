#!/usr/bin/env bash
# FP8 end to end (precision.fp8): FSDP 2 reproduces one process's per-step losses (1e-5) for
# every scaling, with the units' FP8 weights gathered as fp8 bytes (tensorwise, blockwise) and
# without; the bytes each step gathers with and without FP8 gathers; a mixture of experts with
# FP8 experts (and the warning rowwise experts give with e4m3 gradients); FP8 switched off and on
# across a resume; and the recipes FP8 refuses (exit 2).
#
# The parity runs sum each step's gradients in the same order in both layouts (one micro batch
# per rank, no clipping, whose norm is summed in another order): FP8 rounding turns a last-bit
# difference of a weight into a whole fp8 step now and then, so with other orders the runs
# drift apart faster than fp32 runs do (the last check shows by how much).
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
source "$srcdir/tests/integration/lib/expect.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work
write_recipe "$work/recipe.yaml" 10
same_order=(--set train.global_batch_size=4 --set optim.grad_clip=0)

# The bytes step 2's gathers received on rank 0.
gathered_bytes() { grep '"step":2,' "$1/metrics.jsonl" | grep -o '"fsdp.gathered_bytes":[0-9]*' | cut -d: -f2; }

for scaling in tensorwise rowwise rowwise_with_gw_hp blockwise; do
  train "single_$scaling" 1 --set precision.fp8=$scaling "${same_order[@]}"
  train "fsdp2_$scaling" 2 --set precision.fp8=$scaling "${same_order[@]}"
  compare_runs "$work/single_$scaling" "$work/fsdp2_$scaling"
done
for scaling in tensorwise blockwise; do
  train "fsdp2_${scaling}_fp32_gathers" 2 --set precision.fp8=$scaling --set precision.fp8_all_gather=off \
    "${same_order[@]}"
  compare_runs "$work/single_$scaling" "$work/fsdp2_${scaling}_fp32_gathers"
  # The fp8 gathers give the layers the bytes the fp32 gathers' weights quantize to.
  cmp <(losses "$work/fsdp2_$scaling") <(losses "$work/fsdp2_${scaling}_fp32_gathers")
  fp8=$(gathered_bytes "$work/fsdp2_$scaling") fp32=$(gathered_bytes "$work/fsdp2_${scaling}_fp32_gathers")
  echo "$scaling: FSDP 2 gathers $fp8 bytes a step in fp8, $fp32 in fp32 ($(( 100 * fp8 / fp32 ))%)"
  # The linear weights move as 1 byte an element instead of 4; embedding, head and norms as fp32.
  (( fp8 * 100 < fp32 * 45 )) || fail "$scaling: fp8 gathers $fp8 bytes, not under 45% of fp32's $fp32"
done
grep -q "fp8: tensorwise (dequantize + fp32 matmul), output gradients e5m2, FSDP gathers weights in fp8" \
  "$work/fsdp2_tensorwise.log" || { cat "$work/fsdp2_tensorwise.log"; fail "no fp8 line"; }
grep -q "fp8: rowwise_with_gw_hp (dequantize + fp32 matmul; weight gradient unquantized), output gradients e4m3" \
  "$work/fsdp2_rowwise_with_gw_hp.log" || { cat "$work/fsdp2_rowwise_with_gw_hp.log"; fail "no fp8 line"; }

# A mixture of experts: the experts' stacked weights gather in FP8 too.
moe=(--set model.family=qwen3_moe --set model.num_experts=4 --set model.num_experts_per_tok=2
  --set model.moe_intermediate_size=64 --set precision.fp8=tensorwise "${same_order[@]}")
train single_moe 1 "${moe[@]}"
train fsdp2_moe 2 "${moe[@]}"
compare_runs "$work/single_moe" "$work/fsdp2_moe"
# Rowwise experts with the default e4m3 gradients warn and say what to set; e5m2 chosen does not.
rowwise_moe=("${moe[@]}" --set precision.fp8=rowwise --set train.steps=2)
train moe_rowwise 1 "${rowwise_moe[@]}"
expect_text "$work/moe_rowwise.log" "warning: precision.fp8 rowwise on a model with experts: its e4m3 output gradients"
expect_text "$work/moe_rowwise.log" "set precision.fp8_grad: e5m2 or precision.fp8: rowwise_with_gw_hp"
train moe_rowwise_e5m2 1 "${rowwise_moe[@]}" --set precision.fp8_grad=e5m2
! grep -q "model with experts" "$work/moe_rowwise_e5m2.log" || fail "rowwise e5m2 experts warned"
grep -q "fp8: rowwise (dequantize + fp32 matmul), output gradients e5m2" "$work/moe_rowwise_e5m2.log" ||
  fail "no fp8 line with e5m2"

# FP8 on and off across a resume: checkpoints hold the fp32 master weights either way.
train resumed_without_fp8 1 --set checkpoint.resume="$work/single_tensorwise/checkpoints/step-5" "${same_order[@]}"
grep -q "resumed from .*step-5 at step 5" "$work/resumed_without_fp8.log"
train plain 1 --set train.steps=5 "${same_order[@]}"
train resumed_with_fp8 2 --set checkpoint.resume="$work/plain/checkpoints/step-5" --set precision.fp8=blockwise \
  "${same_order[@]}"
grep -q "resumed from .*step-5 at step 5" "$work/resumed_with_fp8.log"

# Two micro batches per rank and clipping: the same within 1e-4 over 10 steps.
train single_accumulated 1 --set precision.fp8=tensorwise
train fsdp2_accumulated 2 --set precision.fp8=tensorwise
"${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}" - "$work/single_accumulated" "$work/fsdp2_accumulated" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(f"{run}/metrics.jsonl") if '"loss"' in l] for run in sys.argv[1:])
worst = max(abs(x["loss"] - y["loss"]) / x["loss"] for x, y in zip(a, b))
print(f"fsdp2_accumulated: {len(a)} steps, max loss difference {worst:.2e} (relative)")
assert len(a) == len(b) == 10 and worst <= 1e-4, worst
PY

expect_exit 2 "$work/fp16.log" "$xtrain" validate "$work/recipe.yaml" --set precision.fp8=tensorwise --set train.dtype=fp16
expect_text "$work/fp16.log" "precision.fp8: tensorwise with train.dtype fp16"
expect_exit 2 "$work/rowwise.log" "$xtrain" validate "$work/recipe.yaml" --set precision.fp8=rowwise \
  --set precision.fp8_all_gather=on
expect_text "$work/rowwise.log" "no one fp8 copy serves both"
expect_exit 2 "$work/gw_hp.log" "$xtrain" validate "$work/recipe.yaml" --set precision.fp8=rowwise_with_gw_hp \
  --set precision.fp8_all_gather=on
expect_text "$work/gw_hp.log" "on with precision.fp8 rowwise_with_gw_hp: a rowwise weight is quantized"
expect_exit 2 "$work/blocks.log" "$xtrain" validate "$work/recipe.yaml" --set precision.fp8=blockwise --set parallel.tp=2
expect_text "$work/blocks.log" "splits into parts of 32 columns, not whole 128-wide blocks"
echo "float8: ok"

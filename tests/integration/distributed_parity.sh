#!/usr/bin/env bash
# Data-parallel layouts train the same model: 20 steps of one process, DDP 2, FSDP 2, FSDP 4 and
# HSDP 2x2 (all started by `xtrain launch`) give the same per-step losses (1e-5 relative) and
# final weights (1e-5 absolute), and so does FSDP 2 with tied embeddings; their step-0 weights
# are bit-identical (mixtures of experts: moe_parallel.sh). Then resharding: FSDP 4's step-10 checkpoint resumed as FSDP 2,
# as one process and as DDP 2 continues with FSDP 4's losses and ends at its weights.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work  # a failed launch keeps its error files under TMPDIR
write_recipe "$work/recipe.yaml" 20

reference single --set checkpoint.at_start=true
train ddp2 2 --set parallel.dp=2 --set parallel.fsdp=1
train fsdp2 2 --set checkpoint.at_start=true
train fsdp4 4 --set checkpoint.at_start=true
train hsdp2x2 4 --set parallel.dp=2 --set parallel.fsdp=2
grep -q "parallel: 4 ranks (torchrun), HSDP dp 2 x fsdp 2" "$work/hsdp2x2.log"
grep -q "parallel: 2 ranks (torchrun), DDP 2" "$work/ddp2.log"
for run in ddp2 fsdp2 fsdp4 hsdp2x2; do compare_runs "$work/single" "$work/$run"; done
# Every layout starts from the same weights, bit for bit (checkpoint.at_start: step-0).
for run in single fsdp2 fsdp4; do "$xtrain" export "$work/$run/checkpoints/step-0" "$work/$run/step0" > /dev/null; done
cmp "$work/single/step0/model.safetensors" "$work/fsdp2/step0/model.safetensors"
cmp "$work/single/step0/model.safetensors" "$work/fsdp4/step0/model.safetensors"
echo "step-0 weights: 1 process, FSDP 2 and FSDP 4 identical ($(stat -c %s "$work/single/step0/model.safetensors") bytes)"
# Tied embeddings: one table serves both ends, so its unit stays gathered for the whole pass.
reference single_tied --set model.tie_embeddings=true
train fsdp2_tied 2 --set model.tie_embeddings=true
compare_runs "$work/single_tied" "$work/fsdp2_tied"
step10=$work/fsdp4/checkpoints/step-10
ls "$step10"/shard-0000{0,1,2,3}.safetensors > /dev/null
train fsdp4_as_fsdp2 2 --set checkpoint.resume="$step10"
train fsdp4_as_single 1 --set checkpoint.resume="$step10"
train fsdp4_as_ddp2 2 --set checkpoint.resume="$step10" --set parallel.dp=2 --set parallel.fsdp=1
for run in fsdp4_as_fsdp2 fsdp4_as_single fsdp4_as_ddp2; do
  grep -q "resumed from $step10 at step 10" "$work/$run.log"
  compare_runs "$work/fsdp4" "$work/$run" 11
done

# A sharded checkpoint serves generate directly, as its exported HF folder does.
sharded=$("$xtrain" generate "$work/fsdp4/checkpoints/latest" --prompt "Once" --max-new-tokens 12 --temperature 0)
exported=$("$xtrain" generate "$work/fsdp4/export" --prompt "Once" --max-new-tokens 12 --temperature 0)
[[ "$sharded" == "$exported" && -n "$sharded" ]]

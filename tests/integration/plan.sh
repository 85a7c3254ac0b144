#!/usr/bin/env bash
# `xtrain plan`: a recipe that fits prints its memory and step-time tables and exits 0; one that
# does not says by how much, its largest term and what shrinks it, and exits 3; --search lists
# layouts that fit; an unknown profile or a layout the cluster cannot hold exits 2 with the fix;
# --validate plans the published runs against their published figures.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/expect.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

expect_exit 0 "$work/fits.log" "$xtrain" plan "$srcdir/recipes/llama-3-70b.yaml" --nodes 8 --gpus-per-node 8
expect_line "$work/fits.log" "layout: 8 nodes x 8 = 64 ranks: fsdp 8 tp 8 with SP"
expect_line "$work/fits.log" "memory per rank"
# Under pipeline parallelism the table is the fullest pipeline rank's: of 405B's 8 stages x 2
# virtual chunks, rank 1's (more micro batches in flight than the head's rank, more layers than
# rank 0, whose first chunk holds the embedding and 7 layers).
expect_exit 0 "$work/pipelined.log" "$xtrain" plan "$srcdir/recipes/llama-3-405b.yaml" --nodes 64
expect_line "$work/pipelined.log" "memory per rank (pipeline rank 1 of 0-7, the fullest)"
expect_text "$work/fits.log" "step time per rank"
grep -E "^  total +[0-9.]+  of 79.6 GiB on a h100-sxm" "$work/fits.log" > /dev/null || fail "no total line"

expect_exit 3 "$work/too_big.log" "$xtrain" plan "$srcdir/recipes/llama-3-405b.yaml" --nodes 1 --set parallel.pp=1
expect_text "$work/too_big.log" "does not fit: "
expect_text "$work/too_big.log" "The largest term is model state (dense)"
expect_text "$work/too_big.log" "to shrink it: parallel.fsdp (more shards), parallel.tp or parallel.pp"

expect_exit 0 "$work/search.log" "$xtrain" plan "$srcdir/recipes/moe-1t.yaml" --nodes 128 --hardware h200 --search
expect_text "$work/search.log" "the fastest 3 that fit:"
[[ $(grep -c "^     --set parallel.tp=" "$work/search.log") -eq 3 ]] || { cat "$work/search.log"; fail "not 3 layouts"; }

# A search with nothing to try says why: DeepSeek-V3's recipe keeps the default global batch of 8
# sequences, which 2048 ranks cannot split.
expect_exit 3 "$work/nothing.log" "$xtrain" plan "$srcdir/recipes/deepseek-v3-671b.yaml" --nodes 256 \
  --hardware h800 --set parallel.ep=8 --search
expect_text "$work/nothing.log" "none: no layout of 2048 ranks gives every data rank whole micro batches of the global batch of 8 sequences"

expect_exit 2 "$work/unknown.log" "$xtrain" plan "$srcdir/recipes/llama-3-70b.yaml" --hardware tpu-v9
expect_text "$work/unknown.log" "--hardware tpu-v9: no such profile or file; the profiles are a100, b200, cpu-here"
expect_exit 2 "$work/ranks.log" "$xtrain" plan "$srcdir/recipes/llama-3-405b.yaml" --nodes 1
expect_text "$work/ranks.log" "parallel.dp 1 x cp 1 x tp 8 x pp 8 = 64 does not divide the 8 ranks of 1 x 8"
# The published runs: every run that is not a calibration row within 15% (or the tolerance its
# row states, with its reason), three calibration rows; one run's whole plan with its engine's
# overlap; a bound no plan meets exits 1.
published="$srcdir/tests/data/plan/published.yaml"
expect_exit 0 "$work/published.log" "$xtrain" plan --validate "$published"
expect_text "$work/published.log" "20 of the 31 runs that are not calibration rows lie within 15%"
[[ $(grep -c " calibration$" "$work/published.log") -eq 3 ]] || { cat "$work/published.log"; fail "not 3 calibration rows"; }
expect_exit 0 "$work/published_run.log" "$xtrain" plan --validate "$published" --run megatron-gpt-32b
expect_text "$work/published_run.log" "behind the last backward and the first forward"
expect_exit 1 "$work/published_tight.log" "$xtrain" plan --validate "$published" --max-error 0.1
expect_exit 2 "$work/published_none.log" "$xtrain" plan --validate "$published" --run gpt-5
expect_text "$work/published_none.log" "--run gpt-5: $published has no such run"
# Leave one source out: the fit on the other sources, the held-out source's rows; an unknown
# source names the known ones.
expect_exit 0 "$work/holdout.log" "$xtrain" plan --validate "$published" --holdout-source trainy-h200 --max-error 20
expect_text "$work/holdout.log" "held out trainy-h200: fitted on the other sources' runs: gemm_efficiency"
expect_exit 2 "$work/holdout_none.log" "$xtrain" plan --validate "$published" --holdout-source nobody
expect_text "$work/holdout_none.log" "has no such source_id"

# The collectives a step waits on as they are called, which the plan charges cpu-here's latency
# for: its count of each kind against the engine's own counters, one step of here-dense (4 micro
# batches on one data rank) and here-moe.
source "$srcdir/tests/integration/lib/distributed.sh"
dense="$srcdir/tests/data/plan/here-dense.yaml" moe="$srcdir/tests/data/plan/here-moe.yaml"
# check_calls NAME RECIPE METRIC TERM SETTINGS...: the engine's METRIC at step 1 equals the count
# in the plan's TERM line.
check_calls() {
  local name=$1 recipe=$2 metric=$3 term=$4
  shift 4
  local sets=()
  for s in "$@"; do sets+=(--set "$s"); done
  expect_exit 0 "$work/$name.log" "$xtrain" launch --nproc-per-node 2 --master-port "$(free_port)" -- \
    train "$recipe" --set run.dir="$work/$name" --set train.steps=1 "${sets[@]}"
  expect_exit 0 "$work/$name.plan" "$xtrain" plan "$recipe" --nodes 1 --gpus-per-node 2 --hardware cpu-here "${sets[@]}"
  local engine planned
  engine=$(grep '"step_s"' "$work/$name/metrics.jsonl" | sed -E "s/.*\"$metric\": *([0-9]+).*/\1/")
  planned=$(grep -E "^  $term " "$work/$name.plan" | sed -E 's/.* ([0-9]+) collectives, .*/\1/')
  echo "$name: $metric $engine, planned $planned"
  [[ -n $engine && $engine == "$planned" ]] || { cat "$work/$name.plan"; fail "$name: $metric $engine, the plan counts '$planned'"; }
}
tp_sp=(parallel.tp=2 parallel.sequence_parallel=true parallel.fsdp=1)
check_calls tp-sp "$dense" tp.collectives "tensor-parallel collectives" "${tp_sp[@]}"
check_calls tp-sp-recompute-unchunked "$dense" tp.collectives "tensor-parallel collectives" "${tp_sp[@]}" \
  memory.recompute=full memory.chunked_loss=off
check_calls tp "$dense" tp.collectives "tensor-parallel collectives" parallel.tp=2 parallel.fsdp=1 memory.chunked_loss=128
check_calls cp-recompute "$dense" cp.ring_waits "context-parallel ring" parallel.cp=2 parallel.fsdp=1 memory.recompute=full
check_calls ep-domino-recompute "$moe" moe.all_to_all_waits "expert all-to-all" parallel.ep=2 \
  parallel.intra_layer_micro_batch=2 memory.recompute=full
echo "plan: ok"

#!/usr/bin/env bash
# train.spike: a loss spike (XTRAIN_FAULT=spike multiplies step 8's loss, and so its gradients, by
# 100, once, as a batch of bad data would) is
#  1. skipped under `skip`: no update (the optimizer takes one step fewer), logged, in metrics;
#  2. rolled back under `rollback`: the weights of step-5 are reloaded and the data of steps 6-8 is
#     skipped; the run goes on from there, resumes bit-identically after a stop, and 2 FSDP ranks
#     take the same decisions as one process (per-step losses within 1e-5);
#  3. skipped under `rollback` when no checkpoint exists yet;
#  4. fatal after train.max_skipped_steps rollbacks to the same checkpoint.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_line() { grep -qxF -- "$2" "$1" || { cat "$1"; fail "no line '$2' in $1"; }; }
# field FILE KEY: a key of trainer_state.json; optimizer_step DIR: the AdamW step count of a checkpoint.
field() { "$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
optimizer_step() {
  "$python" -c 'import sys; from safetensors.numpy import load_file; print(int(load_file(sys.argv[1])["step"]))' \
    "$1/optimizer.safetensors"
}
write_recipe "$work/recipe.yaml" 14
spiky=(--set train.spike_window=4 --set train.log_every=1)
spike_line='step 8: loss spike: loss [0-9.e+]* is [0-9.e+]* standard deviations above the mean [0-9.]* of the last 4 steps'

# --- 1. skip
XTRAIN_FAULT=spike:0:8 train skip 1 "${spiky[@]}" --set train.spike=skip
grep -q "^$spike_line; step skipped, no update$" "$work/skip.log" || { cat "$work/skip.log"; fail "skip line"; }
grep -q '"step":8,.*"skipped":true,"skipped_total":0,"spike":"skip"}' "$work/skip/metrics.jsonl" || fail "step 8 record"
[[ $(grep -c '"spike"' "$work/skip/metrics.jsonl") -eq 1 ]] || fail "more than one spike in $work/skip/metrics.jsonl"
steps=$(optimizer_step "$work/skip/checkpoints/step-14")
[[ $steps -eq 13 ]] || fail "the optimizer took $steps steps in 14, expected 13"
echo "1. skip: step 8 skipped, no update (13 optimizer steps in 14)"

# --- 2. rollback
XTRAIN_FAULT=spike:0:8 train rollback 1 "${spiky[@]}" --set train.spike=rollback
grep -q "^$spike_line; rolled back to $work/rollback/checkpoints/step-5 (step 5), skipping samples 40-63 (the data of steps 6-8)$" \
  "$work/rollback.log" || { cat "$work/rollback.log"; fail "rollback line"; }
grep -qxF '{"step":8,"rollback_to":5,"skipped_samples":[40,64]}' "$work/rollback/metrics.jsonl" || fail "rollback record"
consumed=$(field "$work/rollback/checkpoints/step-10/trainer_state.json" samples_consumed)
[[ $consumed -eq 104 ]] || fail "step-10 has consumed $consumed samples, expected 104 (10 steps of 8 and the 24 skipped)"
steps=$(optimizer_step "$work/rollback/checkpoints/step-10")
[[ $steps -eq 10 ]] || fail "step-10's optimizer took $steps steps, expected 10"
# Stopped after the rollback and resumed: the same weights at step 14.
XTRAIN_FAULT=spike:0:8 train stopped 1 "${spiky[@]}" --set train.spike=rollback --stop-at-step 12
train stopped 1 "${spiky[@]}" --set train.spike=rollback
for file in model.safetensors optimizer.safetensors; do
  cmp "$work/rollback/checkpoints/step-14/$file" "$work/stopped/checkpoints/step-14/$file" || fail "resumed $file differs"
done
# Two FSDP ranks: the same spike, the same rollback, the same losses.
XTRAIN_FAULT=spike:0:8 train rollback2 2 "${spiky[@]}" --set train.spike=rollback
grep -qxF '{"step":8,"rollback_to":5,"skipped_samples":[40,64]}' "$work/rollback2/metrics.jsonl" || fail "2 ranks: rollback record"
compare_runs "$work/rollback" "$work/rollback2"
echo "2. rollback: to step-5, samples 40-63 skipped, step-14 bit-identical after a stop and resume, 2 ranks agree"

# --- 3. rollback without a checkpoint: the step is skipped.
XTRAIN_FAULT=spike:0:8 train early 1 "${spiky[@]}" --set train.spike=rollback --set checkpoint.every=10
grep -q "^$spike_line; step skipped, no update (no checkpoint to roll back to yet)$" "$work/early.log" || {
  cat "$work/early.log"; fail "no-checkpoint line"; }
echo "3. rollback before the first checkpoint: the step is skipped"

# --- 4. spikes that persist stop the run (exit 1): 2 in a row under skip, a second rollback to
# the same checkpoint under rollback (train.max_skipped_steps).
expect_failure() {  # NAME MESSAGE_REGEX args...
  local name=$1 message=$2 status=0
  shift 2
  XTRAIN_FAULT=spike:0:8-9 "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/$name" "${spiky[@]}" "$@" \
    > "$work/$name.log" 2>&1 || status=$?
  [[ $status -eq 1 ]] || { cat "$work/$name.log"; fail "$name exited $status, expected 1"; }
  grep -q "^error: $message$" "$work/$name.log" || { cat "$work/$name.log"; fail "$name: message"; }
}
persistent='the loss has moved to a new level or the run is diverging. Raise train.spike_zscore or train.spike_window, or set train.spike: off'
number='[0-9.e+]*'
expect_failure skip2 "steps 8-9: 2 loss spikes in a row, the last: loss $number is $number standard deviations above the mean $number of the last 4 steps (train.spike skip, train.max_skipped_steps 2): $persistent" \
  --set train.spike=skip --set train.max_skipped_steps=2
expect_failure rollback2x "step 9: loss $number is $number standard deviations above the mean $number of the last 4 steps, and the run has rolled back to the same checkpoint 1 time already (train.spike rollback, train.max_skipped_steps 1): $persistent" \
  --set train.spike=rollback --set train.max_skipped_steps=1
echo "4. persistent spikes stop the run with exit 1: 2 in a row under skip, a second rollback to step-5"

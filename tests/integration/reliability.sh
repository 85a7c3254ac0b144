#!/usr/bin/env bash
# A crash, a bad step or a bad disk never costs a good checkpoint:
#  1. lr 1e6 with checkpoint.every 1: non-finite steps are skipped, the run stops after
#     train.max_skipped_steps with exit 1, and `latest` still holds the finite weights from before;
#  2. bytes flipped inside a tensor are reported by file and tensor, the run resumes from the
#     checkpoint before (bit-identical to a run that was never damaged), strict exits 2;
#  3. non-finite weights (a plain Hugging Face folder, without a manifest): eval and generate exit 1;
#  4. SIGTERM, SIGUSR1 and a STOP file: every rank saves the same step and exits 75, in one
#     process and under `xtrain launch`; the run resumes from that step;
#  5. (a rank that never starts, and a stalled step under the watchdog: reliability_timeouts.sh);
#  6. the smaller findings: thread bound, recipe size, changed settings on resume, a latest that
#     loops, SIGTERM's exit code.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
source "$srcdir/tests/integration/lib/expect.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work
unset OMP_WAIT_POLICY
write_recipe "$work/recipe.yaml" 12
small=("$work/recipe.yaml" --set train.log_every=1)

# --- 1. lr 1e6: skipped steps, no checkpoint of them, finite latest, exit 1.
expect_exit 1 "$work/diverge.log" "$xtrain" train "${small[@]}" --set run.dir="$work/diverge" --set optim.lr=1e6 \
  --set optim.warmup_steps=0 --set checkpoint.every=1 --set checkpoint.keep=2
grep -q "^error: steps [0-9]*-[0-9]*: 5 steps in a row had a non-finite loss or gradient norm (train.max_skipped_steps); the run is diverging. Likely causes: optim.lr too high (now 1e+06), or corrupt data in the samples of these steps. The newest checkpoint that verifies and holds only finite weights and optimizer state (checked now) is $work/diverge/checkpoints/step-[0-9]*$" "$work/diverge.log" || { cat "$work/diverge.log"; fail "divergence message"; }
skipped=$(grep -c '"skipped":true' "$work/diverge/metrics.jsonl")
[[ $skipped -eq 5 ]] || fail "$skipped skipped steps in metrics.jsonl, expected 5"
latest=$(readlink "$work/diverge/checkpoints/latest")
first_skipped=$(grep -m1 -o '"step":[0-9]*,[^}]*"skipped":true' "$work/diverge/metrics.jsonl" | sed 's/"step":\([0-9]*\).*/\1/')
[[ ${latest#step-} -lt $first_skipped ]] || fail "latest is $latest, but steps from $first_skipped on were skipped"
expect_exit 0 "$work/diverge-eval.log" "$xtrain" eval "${small[@]}" --set run.dir="$work/diverge" --set data.eval=builtin:demo-eval \
  --set train.eval_batches=2
grep -qE '^eval loss [0-9]+\.[0-9]+ ' "$work/diverge-eval.log" || fail "eval of latest: $(cat "$work/diverge-eval.log")"
echo "1. lr 1e6: $skipped steps skipped from step $first_skipped, latest $latest holds finite weights, exit 1"

# --- 2. a flipped byte in latest: named by file and tensor; the checkpoint before takes over.
"$xtrain" train "${small[@]}" --set run.dir="$work/straight" --set checkpoint.every=1 --set checkpoint.keep=4 > /dev/null
"$xtrain" train "${small[@]}" --set run.dir="$work/flipped" --set checkpoint.every=1 --set checkpoint.keep=4 \
  --stop-at-step 6 > /dev/null
size_before=$(stat -c %s "$work/flipped/checkpoints/step-6/model.safetensors")
"${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}" - "$work/flipped/checkpoints/step-6/model.safetensors" <<'PY'
import json, struct, sys
path = sys.argv[1]
with open(path, "r+b") as f:
    header_length = struct.unpack("<Q", f.read(8))[0]
    begin, end = json.loads(f.read(header_length))["model.layers.1.mlp.up_proj.weight"]["data_offsets"]
    offset = 8 + header_length + (begin + end) // 2
    f.seek(offset); byte = f.read(1); f.seek(offset); f.write(bytes([byte[0] ^ 0xFF]))
PY
[[ $(stat -c %s "$work/flipped/checkpoints/step-6/model.safetensors") -eq $size_before ]]
expect_exit 2 "$work/strict.log" "$xtrain" train "${small[@]}" --set run.dir="$work/flipped" --set checkpoint.resume=strict
expect_line "$work/strict.log" "$work/flipped/checkpoints/step-6 failed verification (the checksums of every file against manifest.json, and every weight and optimizer value finite): model.safetensors: tensor 'model.layers.1.mlp.up_proj.weight' does not match its checksum; checkpoint.resume is strict, so the run stops: set checkpoint.resume: auto to continue from the newest intact checkpoint"
expect_exit 0 "$work/flipped.log" "$xtrain" train "${small[@]}" --set run.dir="$work/flipped" --set checkpoint.every=1 --set checkpoint.keep=4
expect_line "$work/flipped.log" "warning: skipping damaged checkpoint $work/flipped/checkpoints/step-6: model.safetensors: tensor 'model.layers.1.mlp.up_proj.weight' does not match its checksum; resuming from $work/flipped/checkpoints/step-5 instead"
grep -q "^resumed from $work/flipped/checkpoints/step-5 at step 5 (verified [0-9.]* MiB in [0-9.]* s, every value finite)$" "$work/flipped.log" || fail "resume line"
for file in model.safetensors optimizer.safetensors; do
  cmp "$work/straight/checkpoints/step-12/$file" "$work/flipped/checkpoints/step-12/$file"
done
echo "2. flipped byte: named by file and tensor, resumed from step-5, step-12 bit-identical to the undamaged run"

# --- 3. non-finite weights in a plain Hugging Face folder (no manifest, no trainer state): eval
# and generate exit 1. (A training checkpoint without its manifest is damaged: hostile suite.)
cp -r "$work/straight/checkpoints/step-12" "$work/nan"
rm "$work/nan/manifest.json" "$work/nan/trainer_state.json" "$work/nan/optimizer.safetensors"
"${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}" - "$work/nan/model.safetensors" <<'PY'
import json, struct, sys
with open(sys.argv[1], "r+b") as f:
    header_length = struct.unpack("<Q", f.read(8))[0]
    begin, _ = json.loads(f.read(header_length))["model.norm.weight"]["data_offsets"]
    f.seek(8 + header_length + begin); f.write(struct.pack("<f", float("nan")))
PY
nan_message="$work/nan: the weights are not finite ('model.norm.weight' has 1 NaN and 0 infinite values of 64); this checkpoint cannot be used: take an earlier one"
expect_exit 1 "$work/nan-eval.log" "$xtrain" eval "${small[@]}" --set data.eval=builtin:demo-eval --checkpoint "$work/nan"
expect_line "$work/nan-eval.log" "error: $nan_message"
expect_exit 1 "$work/nan-generate.log" "$xtrain" generate "$work/nan" --prompt x
expect_line "$work/nan-generate.log" "notice: $work/nan: no manifest: a plain Hugging Face folder (no trainer_state.json, optimizer or shard files), loaded unverified"
expect_line "$work/nan-generate.log" "error: $nan_message"
echo "3. non-finite weights: eval and generate exit 1 naming the tensor"

# --- 4. stop signals and the STOP file: exit 75, one checkpoint at the stop step, resumable.
long=("$work/recipe.yaml" --set train.steps=400 --set train.log_every=1)
stop_and_resume() {  # NAME SIGNAL|STOP NPROC
  local name=$1 how=$2 nproc=$3 pid status=0
  local command=("$xtrain" train)
  [[ $nproc == 1 ]] || command=("$xtrain" launch --nproc-per-node "$nproc" --master-port "$(free_port)" -- train)
  "${command[@]}" "${long[@]}" --set run.dir="$work/$name" > "$work/$name.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do grep -q "step  *3/400" "$work/$name.log" && break; sleep 0.1; done
  if [[ $how == STOP ]]; then touch "$work/$name/STOP"; else kill -"$how" $pid; fi
  wait $pid || status=$?
  [[ $status -eq 75 ]] || { cat "$work/$name.log"; fail "$name: exit $status, expected 75"; }
  local stopped
  stopped=$(sed -n 's/.*stopped by .* after step \([0-9]*\); run the same command to continue (exit 75)$/\1/p' "$work/$name.log")
  [[ -n $stopped ]] || { cat "$work/$name.log"; fail "$name: no stop line"; }
  [[ $(readlink "$work/$name/checkpoints/latest") == step-$stopped ]] || fail "$name: latest is not step-$stopped"
  if [[ $nproc == 2 ]]; then  # both ranks' shards in the one checkpoint of the stop step
    [[ -f $work/$name/checkpoints/step-$stopped/shard-00000.safetensors && -f $work/$name/checkpoints/step-$stopped/shard-00001.safetensors ]] ||
      fail "$name: step-$stopped lacks a rank's shard"
    grep -q "launch: stopped by SIG$how: every rank saved a checkpoint at the same step; run the same command to continue (exit 75)" "$work/$name.log" ||
      [[ $how == STOP ]] || fail "$name: launcher line"
  fi
  [[ ! -e $work/$name/STOP ]] || fail "$name: the STOP file was left behind"
  local resume=("$xtrain" train)
  [[ $nproc == 1 ]] || resume=("$xtrain" launch --nproc-per-node "$nproc" --master-port "$(free_port)" -- train)
  "${resume[@]}" "${long[@]}" --set run.dir="$work/$name" --stop-at-step $((stopped + 2)) > "$work/$name.resumed.log" 2>&1
  grep -q "resumed from $work/$name/checkpoints/step-$stopped at step $stopped" "$work/$name.resumed.log" ||
    { cat "$work/$name.resumed.log"; fail "$name: did not resume from step-$stopped"; }
  echo "4. $how, $nproc rank(s): exit 75 after step $stopped, checkpoint step-$stopped, resumed from it"
}
stop_and_resume term-1 TERM 1
stop_and_resume stop-file-1 STOP 1
stop_and_resume usr1-2 USR1 2
stop_and_resume term-2 TERM 2

# --- 6. smaller findings, each with its exact message.
cores=$(nproc)
expect_exit 2 "$work/threads.log" "$xtrain" train "${small[@]}" --set run.dir="$work/threads" --set train.threads=100000
expect_line "$work/threads.log" "--set train.threads=100000: train.threads: must be between 0 (automatic) and 4 x the $cores cores of this machine ($((4 * cores))), got 100000"
head -c 5000000 /dev/zero | tr '\0' '#' > "$work/huge.yaml"
expect_exit 2 "$work/huge.log" "$xtrain" train "$work/huge.yaml"
expect_line "$work/huge.log" "$work/huge.yaml: the file is 5.0 MB; recipes are limited to 4 MB (is it a data file? name data files in data.train)"
expect_exit 2 "$work/fused.log" "$xtrain" train "${small[@]}" --set run.dir="$work/fused" --set train.dtype=bf16 \
  --set memory.fused_kernels=on
expect_line "$work/fused.log" "memory.fused_kernels: on, but this run computes in bf16 on the CPU, where the fused kernels are fp32 only (on CUDA they take fp32, bf16 and fp16); use auto (fused wherever a kernel exists) or off"
printf 'name: alias\nmodel:\n  hidden_size: *width\n' > "$work/alias.yaml"
expect_exit 2 "$work/alias.log" "$xtrain" validate "$work/alias.yaml"
expect_line "$work/alias.log" "$work/alias.yaml:3:16: invalid YAML: the referenced anchor is not defined"
expect_exit 0 "$work/changed.log" "$xtrain" train "${small[@]}" --set run.dir="$work/straight" --set train.steps=14 \
  --set optim.lr=1e-3 --set run.seed=7 --allow-data-change
expect_line "$work/changed.log" "notice: changed since the checkpoint: run.seed: 1234 -> 7"
expect_line "$work/changed.log" "notice: changed since the checkpoint: optim.lr: 0.003 -> 0.001"
expect_line "$work/changed.log" "notice: changed since the checkpoint: train.steps: 12 -> 14"
expect_exit 2 "$work/geometry.log" "$xtrain" train "${small[@]}" --set run.dir="$work/straight" --set train.steps=16 \
  --set train.global_batch_size=16 --set run.seed=7
expect_line "$work/geometry.log" "$work/straight/checkpoints/step-14: the recipe changes which samples the next steps read since this checkpoint (train.global_batch_size: 8 -> 16), so the run would not continue as it would have. Use the checkpoint's value, or pass --allow-data-change (or --allow-changed KEY for one key) to continue anyway"
expect_exit 0 "$work/allowed.log" "$xtrain" train "${small[@]}" --set run.dir="$work/straight" --set train.steps=16 \
  --set train.global_batch_size=16 --set run.seed=7 --allow-changed train.global_batch_size
expect_line "$work/allowed.log" "notice: changed since the checkpoint: train.global_batch_size: 8 -> 16"
# A latest that points at itself: train and eval both fall back to the newest intact checkpoint.
ln -sfn latest "$work/straight/checkpoints/latest"
expect_exit 0 "$work/loop-eval.log" "$xtrain" eval "${small[@]}" --set run.dir="$work/straight" --set data.eval=builtin:demo-eval --set train.eval_batches=1
grep -q "^warning: skipping damaged checkpoint $work/straight/checkpoints/latest: .*; evaluating $work/straight/checkpoints/step-16 instead$" "$work/loop-eval.log" ||
  { cat "$work/loop-eval.log"; fail "loop in eval"; }
expect_exit 0 "$work/loop-train.log" "$xtrain" train "${small[@]}" --set run.dir="$work/straight" --set train.steps=17 \
  --set train.global_batch_size=16 --set run.seed=7
grep -q "^warning: skipping damaged checkpoint $work/straight/checkpoints/latest: .*; resuming from $work/straight/checkpoints/step-16 instead$" "$work/loop-train.log" ||
  { cat "$work/loop-train.log"; fail "loop in train"; }
# Out of memory (an address-space limit stands in for a small machine): the step, the peak and what
# would help, not a trace.
status=0
(ulimit -v 8000000; "$xtrain" train "${small[@]}" --set run.dir="$work/oom" --set data.seq_len=4096 --set train.micro_batch_size=8 \
  --set train.global_batch_size=8 --set memory.attention=naive) > "$work/oom.log" 2>&1 || status=$?
[[ $status -eq 1 ]] || { cat "$work/oom.log"; fail "out of memory: exit $status, expected 1"; }
grep -q "^error: out of memory at step 1 (peak host memory [0-9]* MiB): .*DefaultCPUAllocator: can't allocate memory: you tried to allocate [0-9]* bytes.*Options that need less memory: train.micro_batch_size (now 8; gradient accumulation keeps the global batch), memory.recompute: full (now none), memory.offload_activations: true, memory.chunked_loss (now auto), memory.attention: sdpa or blockwise (now naive), more ranks with parallel.fsdp, train.dtype: bf16 (now fp32)$" "$work/oom.log" ||
  { cat "$work/oom.log"; fail "out-of-memory message"; }
[[ $(wc -l < "$work/oom.log") -lt 12 ]] || fail "out of memory printed $(wc -l < "$work/oom.log") lines"
echo "6. threads, recipe size, fused kernels for bf16 on the CPU, YAML alias, changed settings, geometry refused and allowed, a looping latest, out of memory: exact messages"
echo "reliability: all checks passed"

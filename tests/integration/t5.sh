#!/usr/bin/env bash
# T5 with span corruption on the demo corpus (byte tokenizer, sentinels above its ids): 30 steps
# as one process bring the loss down by a third; FSDP 2, TP 2 and PP 2 give the same per-step
# losses and weights (1e-5), with model.dropout 0.1 too (also TP 2 x FSDP 2; their weights at
# 2e-5, see there), whose run also resumes bit-identically, and whose TP 2 checkpoint resumes as
# one process; a T5 v1.1 with dropout under PP 2, its decoder's first block on the second stage
# beside the encoder's last, gives one process's steps, and its PP 2 checkpoint resumes as one
# process; a T5 v1.1 folder that transformers writes trains 4 steps and its export scores in
# transformers as in xtrain, and so does a T5 v1.1 built from recipe keys alone, also under
# TP 2; the recipe check refuses what t5 does not support, and those keys on another family,
# naming the key.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work
cat > "$work/recipe.yaml" <<YAML
name: t5-check
model:
  family: t5
  hidden_size: 64
  num_layers: 2
  num_heads: 4
  head_dim: 16
  intermediate_size: 128
  tie_embeddings: true
  norm_eps: 1.0e-6
  vocab_size: 320
data:
  train: builtin:demo
  tokenizer: byte
  objective: span_corruption
  seq_len: 64
train:
  steps: 30
  global_batch_size: 8
  micro_batch_size: 4
  log_every: 1
  threads: 1
optim:
  lr: 3.0e-3
  warmup_steps: 5
checkpoint:
  every: 30
  keep: 1
YAML

train single 1
"$python" - "$work/single/metrics.jsonl" <<'PY'
import json, sys
losses = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if "loss" in r]
first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
print(f"t5 span corruption: loss {first:.4f} (steps 1-3) -> {last:.4f} (steps 28-30)")
assert len(losses) == 30 and last < first * 2 / 3, losses
PY
# Weights (absolute) at 1e-4 in every comparison below, the losses and grad norms at 1e-5: an
# element whose gradient lies near Adam's eps, or a ReLU unit whose pre-activation sits at 0 within
# rounding, turns the layouts' other order of summation into up to a few percent of one update
# (lr 3e-3). On a 2-core AMD EPYC, ReLU unit 0 of encoder.block.1's wi opened on a token at step 19
# in one run and not the other, and its row ended 1.07e-5 apart; on an Intel Xeon with
# ATEN_CPU_CAPABILITY=default FSDP 2's weights end 4.8e-5 apart, the losses 1.1e-7.
weights=1e-4
train fsdp2 2 --set parallel.fsdp=2
grep -q "FSDP 2" "$work/fsdp2.log"
compare_runs "$work/single" "$work/fsdp2" 1 "$weights"
# TP 2: heads, the feed-forward width, the position tables by head and the vocabulary split.
# TP 2 and PP 2 over 30 steps: the losses hold 1e-5 on every kernel set, but this ReLU model at
# lr 3e-3 amplifies a layout's other rounding from about step 13 on. On an Intel Xeon, TP 2's grad
# norm drifts 2.1e-5 from one process's by step 18 and 3.8e-4 by step 27 with
# ATEN_CPU_CAPABILITY=avx2 (weights 2.6e-4 apart at step 30), PP 2's the same with avx512
# (3.7e-4, weights 2.6e-4); on an AMD EPYC TP 2's weights ended 2.6e-6 (AVX2) and 1.2e-5
# (default) apart. So their 30 steps hold grad norm and weights at 1e-3, and runs of 12 steps,
# before the drift, hold the grad norms at 1e-5 and the weights at 1e-4.
train tp2 2 --set parallel.tp=2
grep -q "tensor-parallel over tp 2" "$work/tp2.log"
compare_runs "$work/single" "$work/tp2" 1 1e-3 1e-3
short=(--set train.steps=12 --set checkpoint.every=12)
train single_12 1 "${short[@]}"
train tp2_12 2 "${short[@]}" --set parallel.tp=2
compare_runs "$work/single_12" "$work/tp2_12" 1 "$weights"
# PP 2: the embedding and both encoder blocks on the first stage, the decoder's blocks and the
# head on the second, which receives the encoder's states and sends back their gradient.
train pp2 2 --set parallel.pp=2
grep -q "2 pipeline stages" "$work/pp2.log"
compare_runs "$work/single" "$work/pp2" 1 1e-3 1e-3
train pp2_12 2 "${short[@]}" --set parallel.pp=2
compare_runs "$work/single_12" "$work/pp2_12" 1 "$weights"

# Dropout (model.dropout 0.1, keyed masks): 20 steps as FSDP 2 give one process's losses and
# weights (1e-5); step 1's loss differs from the run without dropout on the same weights and
# batch; stopped at step 10 and resumed, the step-20 checkpoint is bit-identical.
dropout=(--set model.dropout=0.1 --set train.steps=20 --set checkpoint.every=10 --set checkpoint.keep=2)
train dropout 1 "${dropout[@]}"
grep -q "model: dropout 0.1" "$work/dropout.log"
train dropout_fsdp2 2 "${dropout[@]}" --set parallel.fsdp=2
compare_runs "$work/dropout" "$work/dropout_fsdp2" 1 "$weights"
first_loss() { grep -m1 '"step":1,' "$1/metrics.jsonl" | sed -E 's/.*"loss":([^,]*),.*/\1/'; }
with=$(first_loss "$work/dropout") without=$(first_loss "$work/single")
echo "t5 dropout: step 1 loss $with with model.dropout 0.1, $without with 0"
[[ "$with" != "$without" ]] || { echo "t5 dropout: model.dropout 0.1 left the loss unchanged"; exit 1; }
train dropout_resumed 1 "${dropout[@]}" --stop-at-step 10
train dropout_resumed 1 "${dropout[@]}"
grep -q "resumed from .*step-10 at step 10" "$work/dropout_resumed.log"
for file in model.safetensors optimizer.safetensors; do
  cmp "$work/dropout/checkpoints/step-20/$file" "$work/dropout_resumed/checkpoints/step-20/$file"
done
echo "t5 dropout: one process == FSDP 2 over 20 steps; 10 + resumed 10 bit-identical"
# Under TP 2 (and TP 2 x FSDP 2) a rank draws its heads' and features' masks of one process's;
# TP 2's step-10 checkpoint resumes as one process with the losses of the run that wrote it.
# (Weights: one element of decoder.block.1's self-attention k has a step-1 gradient of
# 9.5e-9 (the tensor's median 5e-4), at Adam's eps, where the first update's g / (|g| + eps)
# turns the ranks' other order of summation into 1.1e-5; every other element is within 3e-6.)
train dropout_tp2 2 "${dropout[@]}" --set parallel.tp=2
compare_runs "$work/dropout" "$work/dropout_tp2" 1 "$weights"
train dropout_tp2_fsdp2 4 "${dropout[@]}" --set parallel.tp=2
grep -q "FSDP 2, tensor-parallel over tp 2" "$work/dropout_tp2_fsdp2.log"
compare_runs "$work/dropout" "$work/dropout_tp2_fsdp2" 1 "$weights"
step10=$work/dropout_tp2/checkpoints/step-10
train dropout_tp2_as_single 1 "${dropout[@]}" --set checkpoint.resume="$step10"
grep -q "resumed from $step10 at step 10" "$work/dropout_tp2_as_single.log"
compare_runs "$work/dropout_tp2" "$work/dropout_tp2_as_single" 11 "$weights"
# Dropout under PP 2, on a T5 v1.1 (gated GELU: no ReLU unit that a rounding can open or close)
# with one decoder block: the first stage runs the embedding and encoder block 0, the second
# encoder block 1, the encoder's final norm, the decoder and the head, so that the stack changes
# inside a stage. Its step-10 checkpoint resumes as one process. (The v1.0 above with dropout
# under PP 2 ends within 2.2e-6 of one process on the losses but 9.7e-5 on weights, the largest
# all in the ReLU layers' wi: the two stages' gradients of the shared table are summed in another
# order than one process's, and from step 10 on the ReLU layers amplify that rounding; without
# dropout the PP 2 row above holds 2.4e-7.)
v11_dropout=("${dropout[@]}" --set model.feed_forward=gated-gelu --set model.tie_embeddings=false
  --set model.num_decoder_layers=1)
train v11_dropout 1 "${v11_dropout[@]}"
train v11_dropout_pp2 2 "${v11_dropout[@]}" --set parallel.pp=2
compare_runs "$work/v11_dropout" "$work/v11_dropout_pp2" 1 "$weights"
step10=$work/v11_dropout_pp2/checkpoints/step-10
train v11_dropout_pp2_as_single 1 "${v11_dropout[@]}" --set checkpoint.resume="$step10"
grep -q "resumed from $step10 at step 10" "$work/v11_dropout_pp2_as_single.log"
compare_runs "$work/v11_dropout_pp2" "$work/v11_dropout_pp2_as_single" 11 "$weights"

# A T5 v1.1 folder that transformers writes: imported, 4 steps, exported; transformers scores the
# export's loss on 8 held-out samples (`xtrain data batch`) as xtrain's eval does.
"$python" "$srcdir/tools/reference/golden_t5.py" make --style v1.1 --out "$work/hf" --seed 5 --vocab 320 > /dev/null 2>&1
cat > "$work/import.yaml" <<YAML
name: t5-import
model:
  init_from: hf:$work/hf
data:
  train: builtin:demo
  eval: builtin:demo-eval
  tokenizer: byte
  objective: span_corruption
  seq_len: 64
train:
  steps: 4
  global_batch_size: 8
  micro_batch_size: 8
  threads: 1
optim:
  lr: 1.0e-3
checkpoint:
  every: 4
YAML
"$xtrain" train "$work/import.yaml" --set run.dir="$work/imported" > "$work/imported.log" 2>&1 || { cat "$work/imported.log"; exit 1; }
export_latest "$work/imported"
"$xtrain" data batch "$work/import.yaml" --split eval --count 8 --out "$work/batch.safetensors" > /dev/null
ours=$("$xtrain" eval "$work/import.yaml" --set run.dir="$work/imported" --set train.micro_batch_size=8 \
  --set train.eval_batches=1 | grep '^eval loss')
theirs=$("$python" "$srcdir/tools/reference/t5_loss.py" "$work/imported/export" "$work/batch.safetensors" --encoder-length 64)
echo "xtrain: $ours; transformers: $theirs"
"$python" - "$ours" "$theirs" <<'PY'
import re, sys
a = float(re.search(r"eval loss ([0-9.]+)", sys.argv[1]).group(1))
b = float(re.search(r"loss ([0-9.]+)", sys.argv[2]).group(1))
assert abs(a - b) <= 1e-5 * abs(b), (a, b)
PY

# A T5 v1.1 from a recipe alone (gated GELU, its own lm_head, 3 decoder blocks, 8 buckets up to
# offset 20): 2 steps, exported; config.json says that shape, and transformers scores the export
# on 8 held-out samples as xtrain's eval does.
v11=(--set model.feed_forward=gated-gelu --set model.tie_embeddings=false --set model.num_decoder_layers=3
  --set model.relative_buckets=8 --set model.relative_max_distance=20 --set data.eval=builtin:demo-eval)
train v11 1 "${v11[@]}" --set train.steps=2 --set checkpoint.every=2
export_latest "$work/v11"
"$python" - "$work/v11/export/config.json" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))
want = {"feed_forward_proj": "gated-gelu", "num_layers": 2, "num_decoder_layers": 3, "relative_attention_num_buckets": 8,
        "relative_attention_max_distance": 20, "scale_decoder_outputs": False}
assert all(config[k] == v for k, v in want.items()), {k: config.get(k) for k in want}
PY
"$xtrain" data batch "$work/recipe.yaml" "${v11[@]}" --split eval --count 8 --out "$work/v11.safetensors" > /dev/null
ours=$("$xtrain" eval "$work/recipe.yaml" "${v11[@]}" --set run.dir="$work/v11" --set train.micro_batch_size=8 \
  --set train.eval_batches=1 | grep '^eval loss')
theirs=$("$python" "$srcdir/tools/reference/t5_loss.py" "$work/v11/export" "$work/v11.safetensors" --encoder-length 64)
echo "t5 v1.1 from a recipe: xtrain: $ours; transformers: $theirs"
"$python" - "$ours" "$theirs" <<'PY'
import re, sys
a = float(re.search(r"eval loss ([0-9.]+)", sys.argv[1]).group(1))
b = float(re.search(r"loss ([0-9.]+)", sys.argv[2]).group(1))
assert abs(a - b) <= 1e-5 * abs(b), (a, b)
PY
# Under TP 2: wi_0 and wi_1 split by columns, lm_head by vocabulary rows. Weights (1e-4): Adam's
# first steps move a weight whose gradient is near eps by up to the learning rate whatever the
# gradient's last bits, and ATEN_CPU_CAPABILITY=default's kernels leave 1.88e-5 (AVX2's 3.9e-6);
# the losses hold 1e-5.
train v11_tp2 2 "${v11[@]}" --set train.steps=2 --set checkpoint.every=2 --set parallel.tp=2
compare_runs "$work/v11" "$work/v11_tp2" 1 "$weights"

# Generation is for decoders: a T5 export is refused with the reason, exit 2.
set +e
"$xtrain" generate "$work/imported/export" --prompt "x" --max-new-tokens 4 > "$work/generate.log" 2>&1
status=$?
set -e
[[ $status == 2 ]] && grep -q "is an encoder-decoder, and xtrain generates with decoders only" "$work/generate.log" ||
  { cat "$work/generate.log"; echo "generate on a t5 export: exit $status"; exit 1; }

# Refusals, each naming its key.
refused() {
  local key=$1
  shift
  if "$xtrain" validate "$work/recipe.yaml" "$@" > "$work/refused.log" 2>&1; then
    echo "accepted: $*"
    exit 1
  fi
  grep -q ": $key: " "$work/refused.log" || { cat "$work/refused.log"; exit 1; }
}
refused parallel.sequence_parallel --set parallel.tp=2 --set parallel.sequence_parallel=true
refused parallel.cp --set parallel.cp=2
refused data.objective --set data.objective=clm
refused data.pack --set data.pack=true
refused data.objective --set model.family=llama --set model.head_dim=0
refused model.relative_max_distance --set model.relative_max_distance=8
refused model.num_decoder_layers --set model.family=llama --set model.head_dim=0 --set model.num_decoder_layers=3
refused model.feed_forward --set model.family=llama --set model.head_dim=0 --set model.feed_forward=gated-gelu
echo "t5: refusals name their keys"

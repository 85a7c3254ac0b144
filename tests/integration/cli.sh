#!/usr/bin/env bash
# The command line end to end: help, version, validate round trip, every shipped recipe
# validates, train -> eval -> generate on a tiny model, and a kill -9 mid-run costs only the
# steps since the last checkpoint.
set -euo pipefail
xtrain=$1
source_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset OMP_WAIT_POLICY

help=$("$xtrain" --help)
for command in train validate eval generate launch options env; do grep -q "^  $command " <<<"$help"; done
# The version names the LibTorch, whether CUDA was compiled in, and whether a device is there.
"$xtrain" --version | grep -qE \
  '^xtrain [0-9]+\.[0-9]+\.[0-9]+ \(LibTorch 2\.11\.0, (CUDA not compiled|CUDA 1[0-9]\.[0-9.]+ compiled, (no device|[0-9]+ devices? \(.+\))); [A-Za-z]+ build\)$'
"$xtrain" env | grep -qE '^libtorch: 2\.11\.0 from '
"$xtrain" env | grep -qE '^cuda: (not compiled|[0-9.]+ compiled, [0-9]+ device\(s\) visible)$'
set +e; "$xtrain" frobnicate >/dev/null 2>&1; status=$?; set -e
[[ $status -eq 2 ]]

# From the repository root, where the recipes' relative paths (a tokenizer file) lead. The
# vision-language demo's data and init are generated (scripts/vlm-demo.sh writes them to
# data/vlm-demo): here into the scratch folder, which the overrides name.
"${XTRAIN_PYTHON:-$source_dir/.venv/bin/python3}" "$source_dir/tools/data/make_vlm_demo.py" --out "$work/vlm-demo" \
  --train 48 --eval 8 --test 8 > /dev/null 2>&1
# The image-classification demo's likewise (scripts/vit-demo.sh writes them to data/vit-demo).
"${XTRAIN_PYTHON:-$source_dir/.venv/bin/python3}" "$source_dir/tools/reference/vit_images.py" make \
  --out "$work/vit-demo" --size 16 --train 8 --eval 4 > /dev/null 2>&1
"${XTRAIN_PYTHON:-$source_dir/.venv/bin/python3}" "$source_dir/tools/reference/golden_vit.py" make \
  --out "$work/vit-demo/init" --image-size 16 --patch-size 4 --labels 4 > /dev/null 2>&1
# The contrastive demo's likewise (scripts/clip-demo.sh writes them to data/clip-demo).
"${XTRAIN_PYTHON:-$source_dir/.venv/bin/python3}" "$source_dir/tools/reference/clip_pairs.py" make \
  --out "$work/clip-demo" --size 16 --train 8 --eval 4 > /dev/null 2>&1
"${XTRAIN_PYTHON:-$source_dir/.venv/bin/python3}" "$source_dir/tools/reference/golden_clip.py" make \
  --out "$work/clip-demo/init" --vocab 257 --eos 256 --positions 24 --image-size 16 --patch-size 4 > /dev/null 2>&1
printf '%s\n' '{"prompt": "1+2=", "answer": "3"}' '{"prompt": "3+4=", "answer": "7"}' > "$work/grpo-prompts.jsonl"
for recipe in "$source_dir"/recipes/*.yaml; do
  overrides=()
  [[ $(basename "$recipe") != vlm-demo.yaml ]] || overrides=(--set "model.init_from=hf:$work/vlm-demo/init"
    --set "data.train=$work/vlm-demo/train.jsonl" --set "data.eval=$work/vlm-demo/eval.jsonl")
  [[ $(basename "$recipe") != vit-demo.yaml ]] || overrides=(--set "model.init_from=hf:$work/vit-demo/init"
    --set "data.train=$work/vit-demo/train.jsonl" --set "data.eval=$work/vit-demo/eval.jsonl")
  [[ $(basename "$recipe") != clip-demo.yaml ]] || overrides=(--set "model.init_from=hf:$work/clip-demo/init"
    --set "data.train=$work/clip-demo/train.jsonl")
  # The LoRA demo's base is the demo model's export (runs/demo/export): its shape, from a random init.
  [[ $(basename "$recipe") != lora-demo.yaml ]] || overrides=(--set "model.init_from=")
  # The GRPO demo starts from its SFT warm-up's export and reads prompts, both of which
  # scripts/grpo-demo.sh writes: its shape from a random init, and two prompts here.
  [[ $(basename "$recipe") != grpo-demo.yaml ]] || overrides=(--set "model.init_from="
    --set "data.train=$work/grpo-prompts.jsonl")
  (cd "$source_dir" && "$xtrain" validate "$recipe" "${overrides[@]}") > "$work/resolved.yaml"
  (cd "$source_dir" && "$xtrain" validate "$work/resolved.yaml") | cmp - "$work/resolved.yaml"
done

cat > "$work/tiny.yaml" <<YAML
name: tiny
run:
  dir: $work/run
model:
  hidden_size: 32
  num_layers: 1
  num_heads: 2
data:
  seq_len: 32
  eval: builtin:demo-eval
train:
  steps: 6
  global_batch_size: 4
  micro_batch_size: 2
  threads: 1
checkpoint:
  every: 2
  keep: 2
YAML
"$xtrain" train "$work/tiny.yaml" > "$work/train.log"
grep -q "done: 6 steps" "$work/train.log"
grep -q "1 threads (OpenMP wait default)" "$work/train.log"  # train.omp_wait_policy auto: libgomp's default
grep -q "eval step 6: loss" "$work/train.log"
[[ $(readlink "$work/run/checkpoints/latest") == step-6 ]]
[[ $(ls "$work/run/checkpoints" | grep -c '^step-') -eq 2 ]]
"$xtrain" eval "$work/tiny.yaml" | grep -qE '^eval loss [0-9.]+ \| perplexity [0-9.]+ \| accuracy [0-9.]+ \| [0-9]+ tokens$'
out=$("$xtrain" generate "$work/run/checkpoints/latest" --prompt "Once" --max-new-tokens 20 --seed 5)
[[ $out == Once* ]]
again=$("$xtrain" generate "$work/run/checkpoints/latest" --prompt "Once" --max-new-tokens 20 --seed 5)
[[ "$out" == "$again" ]]
set +e; "$xtrain" generate "$work/nope" --prompt x >/dev/null 2>"$work/err"; status=$?; set -e
[[ $status -eq 2 ]]
grep -qx "$work/nope: no such checkpoint folder" "$work/err"

# A damaged checkpoint is never trained on: its manifest names the file, and the run continues
# from the checkpoint before it (checkpoint.resume strict: exit 2). Without its manifest, a
# training checkpoint is damaged in the same way: deleting it turns no check off.
cp -r "$work/run" "$work/corrupt"
echo '{"step": 6}' > "$work/corrupt/checkpoints/step-6/trainer_state.json"
"$xtrain" train "$work/tiny.yaml" --set run.dir="$work/corrupt" --set train.steps=8 --stop-at-step 5 >"$work/out" 2>"$work/err"
grep -qx "warning: skipping damaged checkpoint $work/corrupt/checkpoints/step-6: trainer_state.json: 12 bytes, the manifest says [0-9]* (truncated or overwritten); resuming from $work/corrupt/checkpoints/step-4 instead" "$work/err"
grep -q "resumed from $work/corrupt/checkpoints/step-4 at step 4 (verified " "$work/out"
cp -r "$work/run" "$work/strict"
echo '{"step": 6}' > "$work/strict/checkpoints/step-6/trainer_state.json"
set +e; "$xtrain" train "$work/tiny.yaml" --set run.dir="$work/strict" --set checkpoint.resume=strict >/dev/null 2>"$work/err"; status=$?; set -e
[[ $status -eq 2 ]]
grep -q "^$work/strict/checkpoints/step-6 failed verification (.*): trainer_state.json: " "$work/err"
rm "$work/strict/checkpoints/step-6/manifest.json"
set +e; "$xtrain" train "$work/tiny.yaml" --set run.dir="$work/strict" --set checkpoint.resume=strict >/dev/null 2>"$work/err"; status=$?; set -e
[[ $status -eq 2 ]]
grep -q "^$work/strict/checkpoints/step-6 failed verification (.*): manifest.json: missing, but the folder holds optimizer.safetensors, trainer_state.json: " "$work/err"
"$xtrain" train "$work/tiny.yaml" --set run.dir="$work/strict" --set train.steps=8 --stop-at-step 5 >"$work/out" 2>"$work/err"
grep -q "^warning: skipping damaged checkpoint $work/strict/checkpoints/step-6: manifest.json: missing, .*; resuming from $work/strict/checkpoints/step-4 instead$" "$work/err"

# bf16 autocast and a JSONL source train too; the loss falls.
for i in $(seq 1 200); do echo "{\"text\": \"the cat sat on the mat number $i. the dog sat on the log.\"}"; done > "$work/docs.jsonl"
"$xtrain" train "$work/tiny.yaml" --set run.dir="$work/bf16" --set train.dtype=bf16 --set data.train="$work/docs.jsonl" \
  --set data.eval= --set train.steps=20 --set optim.lr=1e-2 > "$work/bf16.log"
first=$(sed -n '1s/.*"loss":\([0-9.e+-]*\).*/\1/p' "$work/bf16/metrics.jsonl")
last=$(sed -n '20s/.*"loss":\([0-9.e+-]*\).*/\1/p' "$work/bf16/metrics.jsonl")
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 1.0) }'
grep -q "(OpenMP wait default)" "$work/bf16.log"
OMP_WAIT_POLICY=active "$xtrain" train "$work/tiny.yaml" --set run.dir="$work/active" --set train.steps=1 \
  --set optim.warmup_steps=0 --set data.eval= > "$work/active.log"
grep -q "(OpenMP wait active)" "$work/active.log"
"$xtrain" train "$work/tiny.yaml" --set run.dir="$work/passive" --set train.steps=1 --set optim.warmup_steps=0 \
  --set data.eval= --set train.omp_wait_policy=passive > "$work/passive.log"
grep -q "(OpenMP wait passive)" "$work/passive.log"  # set by re-executing xtrain

# kill -9 during training: latest still names a complete checkpoint and the run resumes.
"$xtrain" train "$work/tiny.yaml" --set run.dir="$work/killed" --set train.steps=400 \
  --set checkpoint.every=1 > "$work/killed.log" &
pid=$!
for _ in $(seq 1 200); do
  [[ -L "$work/killed/checkpoints/latest" ]] && break
  sleep 0.05
done
sleep 0.3
kill -9 $pid; wait $pid 2>/dev/null || true
latest=$(readlink "$work/killed/checkpoints/latest")
for file in model.safetensors optimizer.safetensors trainer_state.json config.json recipe.yaml; do
  [[ -s "$work/killed/checkpoints/$latest/$file" ]]
done
"$xtrain" train "$work/tiny.yaml" --set run.dir="$work/killed" --set train.steps=400 --stop-at-step 400 \
  --set checkpoint.every=100 > "$work/resumed.log"
grep -q "resumed from .*$latest" "$work/resumed.log"
[[ -z $(ls -A "$work/killed/checkpoints" | grep '^\.tmp') ]]
echo "cli: all checks passed"

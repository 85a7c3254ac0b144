#!/usr/bin/env bash
# model.init_from: hf:DIR against transformers. A random Qwen3 that save_pretrained split over
# several files (with its index) and a trained tokenizer.json: xtrain takes the shape and the
# tokenizer from the folder, and its eval loss before the first step is transformers' within
# 1e-5. Fine-tuned under FSDP 2, the export (split over files with an index) loads back in
# transformers (AutoTokenizer and AutoModelForCausalLM), whose eval loss is xtrain's final one
# within 1e-5. The same for a Qwen3-MoE folder (experts stored apart) trained with its experts
# split over 2 ranks, and for DeepSeek-V3 (its expert bias too) and GPT-OSS folders under FSDP 2. A resumed run reads its checkpoint, not the folder. Fails when the Python ($XTRAIN_PYTHON, else
# .venv/bin/python3) has no transformers.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
source "$srcdir/tests/integration/lib/expect.sh"
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work

# eval_losses MODEL...: transformers' eval loss of each folder on $work/eval.jsonl, one line each
# ("LOSS TARGETS", as `hf_folder.py eval-loss` prints), from one Python: importing transformers
# costs seconds a process.
eval_losses() {
  "$python" - "$srcdir/tools/reference" "$work/eval.jsonl" "$@" <<'PY'
import argparse, sys
sys.path.insert(0, sys.argv[1])
import hf_folder, torch, transformers
torch.set_num_threads(1)
transformers.utils.logging.disable_progress_bar()
for model in sys.argv[3:]:
    hf_folder.eval_loss(argparse.Namespace(model=model, data=sys.argv[2], seq_len=32))
PY
}

"$python" "$srcdir/tools/data/make_tokenizer_text.py" --size 60000 > "$work/text.txt"
"$python" "$srcdir/tools/data/train_hf_bpe.py" "$work/text.txt" "$work/tokenizers" > /dev/null
"$python" "$srcdir/tools/reference/hf_folder.py" make --family qwen3 --tokenizer "$work/tokenizers/qwen2.json" \
  --out "$work/qwen3"
shards=$(ls "$work/qwen3" | grep -c '^model-.*-of-.*\.safetensors$' || true)
[[ -f $work/qwen3/model.safetensors.index.json && $shards -ge 2 ]] || {
  ls "$work/qwen3"
  exit 1
}
# Documents of 400 characters, as JSONL records: 3/4 to train on, 1/4 to evaluate.
"$python" - "$work" <<'PY'
import json, sys
work = sys.argv[1]
text = open(f"{work}/text.txt", encoding="utf-8").read()
docs = [text[i:i + 400] for i in range(0, len(text), 400)]
cut = len(docs) * 3 // 4
for name, part in (("train", docs[:cut]), ("eval", docs[cut:])):
    with open(f"{work}/{name}.jsonl", "w", encoding="utf-8") as f:
        for doc in part:
            f.write(json.dumps({"text": doc}, ensure_ascii=False) + "\n")
PY

cat > "$work/recipe.yaml" <<YAML
name: init-from-hf
model:
  init_from: hf:$work/qwen3
data:
  train: $work/train.jsonl
  eval: $work/eval.jsonl
  seq_len: 32
train:
  steps: 4
  global_batch_size: 8
  micro_batch_size: 4
  eval_batches: 0
  eval_at_start: true
  threads: 1
optim:
  lr: 1.0e-3
  warmup_steps: 0
checkpoint:
  every: 2
YAML
# The shape and the tokenizer come from the folder.
"$xtrain" validate "$work/recipe.yaml" > "$work/resolved.yaml"
for line in "family: qwen3" "head_dim: 8" "num_kv_heads: 2" "max_seq_len: 128" "norm_eps: 1e-06" \
  "tokenizer: hf:$work/qwen3"; do
  grep -q "^  $line\$" "$work/resolved.yaml" || { echo "resolved recipe lacks '$line'"; cat "$work/resolved.yaml"; exit 1; }
done

train fsdp2 2 --stop-at-step 2
# A plain Hugging Face folder has no manifest: it loads unverified, and the log says so.
grep -q "model: initial weights from hf:$work/qwen3 ([0-9]* tensors; no manifest: a plain Hugging Face folder (no trainer_state.json, optimizer or shard files), loaded unverified), its shards on each rank" "$work/fsdp2.log" || {
  cat "$work/fsdp2.log"
  exit 1
}
# Resumed: the checkpoint's weights, not the folder's again (its weight files are away meanwhile;
# config.json and the tokenizer stay, as the recipe takes them from the folder).
mkdir "$work/away" && mv "$work"/qwen3/*.safetensors "$work/away/"
train fsdp2 2
mv "$work"/away/*.safetensors "$work/qwen3/"
grep -q "resumed from .*step-2 at step 2" "$work/fsdp2.log"
if grep -q "weights from hf:" "$work/fsdp2.log"; then echo "the resumed run read the folder again"; exit 1; fi
# Exported twice into one folder: whole, then split over files of at most 300 KB with an index
# (the whole file goes, so transformers cannot pick it).
"$xtrain" export "$work/fsdp2/checkpoints/latest" "$work/export" > /dev/null
ls "$work/export"/{config.json,generation_config.json,model.safetensors,tokenizer.json,tokenizer_config.json} > /dev/null
"$xtrain" export "$work/fsdp2/checkpoints/latest" "$work/export" --max-shard-size 300KB --overwrite > /dev/null
[[ ! -e $work/export/model.safetensors && -f $work/export/model.safetensors.index.json ]]
ls "$work/export"/model-0000{1,2,3}-of-0000?.safetensors > /dev/null
# xtrain reads its own split export back: the same text as from the checkpoint.
from_checkpoint=$("$xtrain" generate "$work/fsdp2/checkpoints/latest" --prompt "The" --max-new-tokens 8 --temperature 0)
from_export=$("$xtrain" generate "$work/export" --prompt "The" --max-new-tokens 8 --temperature 0)
[[ -n $from_export && $from_export == "$from_checkpoint" ]] || { echo "'$from_export' vs '$from_checkpoint'"; exit 1; }

{ read -r start_reference _; read -r end_reference _; } < <(eval_losses "$work/qwen3" "$work/export")
"$python" - "$work/fsdp2/metrics.jsonl" "$start_reference" "$end_reference" <<'PY'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
evals = {r["step"]: r["eval_loss"] for r in records if "eval_loss" in r}
start, end = float(sys.argv[2]), float(sys.argv[3])
first, last = evals[0], evals[max(evals)]
print(f"init_from hf: eval loss at step 0 {first:.8f} vs transformers {start:.8f} (difference {abs(first - start):.2e}); "
      f"after {max(evals)} FSDP 2 steps {last:.8f} vs transformers on the export {end:.8f} "
      f"(difference {abs(last - end):.2e})")
assert abs(first - start) <= 1e-5 and abs(last - end) <= 1e-5
assert last < first - 1e-3, "fine-tuning did not lower the eval loss"
PY

# Llama 3's rotary scaling, and a rotary base other than 10000 (transformers 5 keeps both in
# rope_parameters): the eval loss before the first step is transformers' within 1e-5.
"$python" "$srcdir/tools/reference/hf_folder.py" make --family llama --tokenizer "$work/tokenizers/qwen2.json" \
  --out "$work/llama3" --rope-theta 500000 --llama3-scaling > /dev/null
"$xtrain" validate "$work/recipe.yaml" --set model.init_from="hf:$work/llama3" > "$work/llama3.yaml"
for line in "family: llama" "rope_theta: 500000.0" "rope_scaling_factor: 8.0" "rope_original_max_len: 16"; do
  grep -q "^  $line\$" "$work/llama3.yaml" || { echo "resolved recipe lacks '$line'"; cat "$work/llama3.yaml"; exit 1; }
done
"$xtrain" train "$work/recipe.yaml" --set model.init_from="hf:$work/llama3" --set run.dir="$work/llama3-run" \
  --stop-at-step 1 > "$work/llama3.log"
read -r llama3_reference _ < <("$python" "$srcdir/tools/reference/hf_folder.py" eval-loss --model "$work/llama3" \
  --data "$work/eval.jsonl" --seq-len 32)
"$python" - "$work/llama3-run/metrics.jsonl" "$llama3_reference" <<'PY'
import json, sys
first = next(json.loads(line)["eval_loss"] for line in open(sys.argv[1]) if '"eval_loss"' in line)
reference = float(sys.argv[2])
print(f"init_from hf, llama3 rope scaling: eval loss at step 0 {first:.8f} vs transformers {reference:.8f} "
      f"(difference {abs(first - reference):.2e})")
assert abs(first - reference) <= 1e-5
PY

# A mixture of experts as transformers saves it (each expert's projections apart), trained with
# its experts split over 2 ranks and exported: transformers computes xtrain's eval loss on the
# folder before the first step and on the export after the last.
"$python" "$srcdir/tools/reference/hf_folder.py" make --family qwen3_moe --tokenizer "$work/tokenizers/qwen2.json" \
  --out "$work/qwen3_moe" > /dev/null
train moe_ep2 2 --set model.init_from="hf:$work/qwen3_moe" --set parallel.ep=2
grep -q "experts split over ep 2" "$work/moe_ep2.log"
"$xtrain" export "$work/moe_ep2/checkpoints/latest" "$work/moe_export" > /dev/null
{ read -r moe_start _; read -r moe_end _; } < <(eval_losses "$work/qwen3_moe" "$work/moe_export")
"$python" - "$work/moe_ep2/metrics.jsonl" "$moe_start" "$moe_end" <<'PY'
import json, sys
evals = {r["step"]: r["eval_loss"] for r in map(json.loads, open(sys.argv[1])) if "eval_loss" in r}
start, end = float(sys.argv[2]), float(sys.argv[3])
first, last = evals[0], evals[max(evals)]
print(f"init_from hf, qwen3_moe under EP 2: eval loss at step 0 {first:.8f} vs transformers {start:.8f} "
      f"(difference {abs(first - start):.2e}); after {max(evals)} steps {last:.8f} vs transformers on the export "
      f"{end:.8f} (difference {abs(last - end):.2e})")
assert abs(first - start) <= 1e-5 and abs(last - end) <= 1e-5
assert last < first - 1e-3, "fine-tuning did not lower the eval loss"
PY

# DeepSeek-V3 (latent attention under YaRN, experts stored apart, the expert bias a buffer) and
# GPT-OSS (sinks, a sliding window, biased experts and router) as transformers saves them, split
# over several files with an index, fine-tuned 4 steps under FSDP 2 and exported: transformers
# computes xtrain's eval loss on the folder before the first step and on the export after the
# last.
for family in deepseek_v3 gpt_oss; do
  "$python" "$srcdir/tools/reference/hf_folder.py" make --family $family --tokenizer "$work/tokenizers/qwen2.json" \
    --out "$work/$family" > /dev/null
  [[ -f $work/$family/model.safetensors.index.json ]]
  train ${family}_fsdp2 2 --set model.init_from="hf:$work/$family"
  grep -q "model: initial weights from hf:$work/$family (" "$work/${family}_fsdp2.log"
  "$xtrain" export "$work/${family}_fsdp2/checkpoints/latest" "$work/${family}_export" > /dev/null
  { read -r family_start _; read -r family_end _; } < <(eval_losses "$work/$family" "$work/${family}_export")
  "$python" - "$work/${family}_fsdp2/metrics.jsonl" "$family_start" "$family_end" $family <<'PY'
import json, sys
evals = {r["step"]: r["eval_loss"] for r in map(json.loads, open(sys.argv[1])) if "eval_loss" in r}
start, end, family = float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
first, last = evals[0], evals[max(evals)]
print(f"init_from hf, {family} under FSDP 2: eval loss at step 0 {first:.8f} vs transformers {start:.8f} "
      f"(difference {abs(first - start) / start:.2e} relative); after {max(evals)} steps {last:.8f} vs transformers "
      f"on the export {end:.8f} (difference {abs(last - end) / end:.2e} relative)")
assert abs(first - start) <= 1e-5 * start and abs(last - end) <= 1e-5 * end
assert last < first - 1e-3, "fine-tuning did not lower the eval loss"
PY
done

# A shape the recipe sets must agree with config.json.
expect_refusal 2 "$work/error.txt" "model.hidden_size: 128, but $work/qwen3/config.json says 64" \
  "$xtrain" validate "$work/recipe.yaml" --set model.hidden_size=128

# An export carries a manifest: a flipped byte in one of its files stops init_from before any
# step, naming the file.
printf '\x5a' | dd of="$work/export/model-00002-of-00003.safetensors" bs=1 seek=4000 conv=notrunc status=none
expect_exit 2 "$work/error.txt" \
  "$xtrain" train "$work/recipe.yaml" --set model.init_from="hf:$work/export" --set run.dir="$work/damaged"
expect_match "$work/error.txt" "model.init_from hf:$work/export: model-00002-of-00003.safetensors: .*does not match"

#!/usr/bin/env bash
# model.init_from: hf:DIR of quantized folders against transformers. A DeepSeek-V3 folder in FP8
# (F8_E4M3 projections with a float32 weight_scale_inv per 128x128 block, quantized by
# transformers' own Fp8Quantize, the rest BF16) and a GPT-OSS folder whose experts are MXFP4
# (*_blocks of FP4 values, *_scales of e8m0 exponents), each split over two files with an index
# (tools/reference/quantized_folder.py): trained under FSDP 2, each rank reading its shards, xtrain's
# eval loss before the first step is transformers' on the model its loader dequantizes
# (dequantize=True) within 1e-5. The export of the fine-tuned run has float weights, a config.json
# without quantization_config, and transformers loads it: its eval loss is xtrain's last one
# within 1e-5. Fails when the Python ($XTRAIN_PYTHON, else .venv/bin/python3) has no transformers.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
source "$srcdir/tests/integration/lib/expect.sh"
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
work=$(mktemp -d)
trap '[[ -n "${KEEP_WORK:-}" ]] || rm -rf "$work"' EXIT
export TMPDIR=$work

"$python" "$srcdir/tools/data/make_tokenizer_text.py" --size 60000 > "$work/text.txt"
"$python" "$srcdir/tools/data/train_hf_bpe.py" "$work/text.txt" "$work/tokenizers" > /dev/null
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
name: quantized-import
data:
  train: $work/train.jsonl
  eval: $work/eval.jsonl
  seq_len: 32
train:
  steps: 2
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

reference=("$python" "$srcdir/tools/reference/quantized_folder.py")
for format in fp8 mxfp4; do
  "${reference[@]}" make --format $format --tokenizer "$work/tokenizers/qwen2.json" --out "$work/$format"
  grep -q "\"quant_method\": \"$format\"" "$work/$format/config.json" || fail "$format: config.json names no $format"
  train ${format}_fsdp2 2 --set model.init_from="hf:$work/$format"
  expect_text "$work/${format}_fsdp2.log" "model: initial weights from hf:$work/$format ("
  expect_text "$work/${format}_fsdp2.log" "of them $format dequantized"
  "$xtrain" export "$work/${format}_fsdp2/checkpoints/latest" "$work/${format}_export" > /dev/null
  ! grep -q '"quantization_config"' "$work/${format}_export/config.json" || fail "$format: the export keeps quantization_config"
  read -r start _ < <("${reference[@]}" eval-loss --model "$work/$format" --data "$work/eval.jsonl" --seq-len 32)
  read -r end _ < <("${reference[@]}" eval-loss --model "$work/${format}_export" --data "$work/eval.jsonl" --seq-len 32)
  "$python" - "$work/${format}_fsdp2/metrics.jsonl" "$start" "$end" $format <<'PY'
import json, sys
evals = {r["step"]: r["eval_loss"] for r in map(json.loads, open(sys.argv[1])) if "eval_loss" in r}
start, end, format = float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
first, last = evals[0], evals[max(evals)]
print(f"init_from hf, {format} under FSDP 2: eval loss at step 0 {first:.8f} vs transformers dequantized "
      f"{start:.8f} (difference {abs(first - start):.2e}); after {max(evals)} steps {last:.8f} vs transformers on "
      f"the export {end:.8f} (difference {abs(last - end):.2e})")
assert abs(first - start) <= 1e-5 and abs(last - end) <= 1e-5
assert last < first - 1e-3, "fine-tuning did not lower the eval loss"
PY
done

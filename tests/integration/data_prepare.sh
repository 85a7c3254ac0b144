#!/usr/bin/env bash
# `xtrain data prepare` end to end: the files are byte-identical for 1, 2 and 3 workers, and
# byte-identical to the same dataset written by an independent numpy writer in Megatron's layout
# (tools/data/indexed_dataset_reference.py, with the byte tokenizer and a SentencePiece model);
# Megatron's reader accepts them; chat records give a loss mask; bad input is exit 2 with the
# file and line, and leaves no output. Fails when the Python ($XTRAIN_PYTHON, else
# .venv/bin/python3) has no numpy or sentencepiece, both pinned in requirements/python.txt.
set -euo pipefail
xtrain=$1
source_dir=$2
python=${XTRAIN_PYTHON:-$source_dir/.venv/bin/python3}
for module in numpy sentencepiece; do
  if ! "$python" -c "import $module" 2> /dev/null; then
    echo "error: $python cannot import $module, which the reference writer needs" >&2
    echo "  (scripts/setup-deps.sh installs it from requirements/python.txt)" >&2
    exit 1
  fi
done
reference=("$python" "$source_dir/tools/data/indexed_dataset_reference.py")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$xtrain" --help | grep -q "^  data "
"$xtrain" data --help | grep -q "^  prepare "

# Documents of 0 to 3000 bytes cut from the multilingual tokenizer text, in two JSONL files
# (with a blank line and a CRLF line end) and a text file.
"$python" - "$work" "$source_dir" <<'PY'
import json, random, sys
sys.path.insert(0, sys.argv[2] + "/tools/data")
from make_tokenizer_text import make_text
work = sys.argv[1]
text = make_text(400_000, seed=3)
r = random.Random(5)
documents, start = [], 0
while start < len(text):
    end = start + r.randint(1, 3000)
    documents.append(text[start:end])
    start = end
half = len(documents) // 2
with open(f"{work}/a.jsonl", "w", encoding="utf-8", newline="") as f:
    for i, document in enumerate(documents[:half]):
        f.write(json.dumps({"id": i, "text": document}, ensure_ascii=False) + ("\r\n" if i == 3 else "\n"))
        if i == 5:
            f.write("\n")
with open(f"{work}/b.jsonl", "w", encoding="utf-8", newline="") as f:
    for document in documents[half:]:
        f.write(json.dumps({"text": document}) + "\n")
with open(f"{work}/c.txt", "w", encoding="utf-8", newline="") as f:
    f.write(text[:5000])
with open(f"{work}/chat.jsonl", "w", encoding="utf-8") as f:
    for i in range(50):
        messages = [{"role": "system", "content": "Answer briefly."}]
        for turn in range(1 + i % 3):
            messages += [{"role": "user", "content": documents[i + turn][:200]},
                         {"role": "assistant", "content": documents[i + turn + 1][:300]}]
        f.write(json.dumps({"messages": messages}) + "\n")
PY
inputs=("$work/a.jsonl" "$work/c.txt" "$work/b.jsonl")

prepare() {  # prepare TOKENIZER OUTPUT WORKERS [more options]
  local tokenizer=$1 output=$2 workers=$3
  shift 3
  "$xtrain" data prepare --tokenizer "$tokenizer" --input "${inputs[@]}" --output "$output" --workers "$workers" "$@" \
    > "$output.log" 2> "$output.progress"
}

# Byte tokenizer: 1, 2 and 3 workers, and the numpy reference, all identical.
for workers in 1 2 3; do prepare byte "$work/byte$workers" "$workers"; done
"${reference[@]}" write --tokenizer byte --output "$work/byte_ref" "${inputs[@]}" > /dev/null
for name in byte2 byte3 byte_ref; do
  cmp "$work/byte1.idx" "$work/$name.idx"
  cmp "$work/byte1.bin" "$work/$name.bin"
done
"${reference[@]}" check "$work/byte1"
grep -q "^wrote $work/byte1.idx + $work/byte1.bin: .* documents, .* tokens (uint16)" "$work/byte1.log"
# Not a terminal: plain progress lines, the last one final.
tail -n 1 "$work/byte1.progress" | grep -q "documents | .* tokens | .* MB/s | done in"

# SentencePiece: 1 and 3 workers, and the reference, all identical.
"$python" - "$work" <<'PY' 2> "$work/spm.log" || { cat "$work/spm.log"; exit 1; }
import sys
import sentencepiece as spm
work = sys.argv[1]
spm.SentencePieceTrainer.train(input=f"{work}/c.txt", model_prefix=f"{work}/spm", vocab_size=800,
                               model_type="unigram", character_coverage=1.0, byte_fallback=True,
                               hard_vocab_limit=False)
PY
for workers in 1 3; do prepare "sentencepiece:$work/spm.model" "$work/spm$workers" "$workers"; done
"${reference[@]}" write --tokenizer "sentencepiece:$work/spm.model" --workers 2 --output "$work/spm_ref" \
  "${inputs[@]}" > /dev/null
for name in spm3 spm_ref; do
  cmp "$work/spm1.idx" "$work/$name.idx"
  cmp "$work/spm1.bin" "$work/$name.bin"
done
echo "sentencepiece: identical to the reference"

# Chat records: tokens plus a loss mask of the same sizes, identical for any number of workers.
inputs=("$work/chat.jsonl")
for workers in 1 2; do prepare byte "$work/chat$workers" "$workers" --format chat --chat-template llama3; done
for file in chat2.idx chat2.bin chat2.loss_mask.idx chat2.loss_mask.bin; do cmp "$work/chat1${file#chat2}" "$work/$file"; done
"${reference[@]}" check "$work/chat1.loss_mask" | grep -q "50 documents, .* tokens, uint8"
grep -q "^loss mask: $work/chat1.loss_mask.idx" "$work/chat1.log"
# A later run without conversations over the same prefix drops the stale mask.
inputs=("$work/c.txt")
prepare byte "$work/chat1" 1
[[ ! -e "$work/chat1.loss_mask.idx" ]]

# The recipe reads a prepared dataset, alone or in a blend.
cat > "$work/recipe.yaml" <<YAML
name: prepared
data:
  train: megatron:$work/byte1
  eval:
    - {path: megatron:$work/byte2, weight: 2}
    - {path: builtin:demo-eval, weight: 1}
YAML
"$xtrain" validate "$work/recipe.yaml" > "$work/resolved.yaml"
grep -q "^  train: megatron:$work/byte1$" "$work/resolved.yaml"
grep -q "^  eval: \[{path: megatron:$work/byte2, weight: 2}, {path: builtin:demo-eval, weight: 1}\]$" "$work/resolved.yaml"
"$xtrain" validate "$work/resolved.yaml" | cmp - "$work/resolved.yaml"

expect_bad_input() {  # expect_bad_input MESSAGE COMMAND...
  local message=$1
  shift
  set +e
  "$@" > /dev/null 2> "$work/error.txt"
  local status=$?
  set -e
  if [[ $status -ne 2 ]] || ! grep -qF -- "$message" "$work/error.txt"; then
    echo "expected exit 2 and '$message', got $status:"
    cat "$work/error.txt"
    exit 1
  fi
}
printf '{"text": "ok"}\n\n{"text": "broken}\n' > "$work/bad.jsonl"
expect_bad_input "$work/bad.jsonl:3: invalid JSON" \
  "$xtrain" data prepare --tokenizer byte --input "$work/bad.jsonl" --output "$work/bad"
[[ -z $(find "$work" -name 'bad.*' ! -name bad.jsonl) ]]
expect_bad_input "$work/a.jsonl:1: missing field \"messages\"" \
  "$xtrain" data prepare --tokenizer byte --input "$work/a.jsonl" --output "$work/bad" --format chat
expect_bad_input "file not found: $work/missing.jsonl" \
  "$xtrain" data prepare --tokenizer byte --input "$work/missing.jsonl" --output "$work/bad"
expect_bad_input "unknown chat template 'vicuna'" \
  "$xtrain" data prepare --tokenizer byte --input "$work/chat.jsonl" --output "$work/bad" --chat-template vicuna
echo "data prepare: ok"

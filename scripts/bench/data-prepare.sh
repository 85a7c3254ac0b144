#!/usr/bin/env bash
# Tokenizes the same JSONL text into a Megatron indexed dataset with `xtrain data prepare` and
# with Python's sentencepiece in a multiprocessing Pool (tools/data/indexed_dataset_reference.py,
# which encodes and writes as Megatron's tools/preprocess_data.py does), with the same
# SentencePiece model (trained here) and the same number of workers, in alternating rounds in
# one invocation. Prints tokens/s of both and their ratio (medians), and checks that the two
# datasets are byte-identical.
#   scripts/bench/data-prepare.sh [--workers N] [--size MB] [--rounds N] [--model-type unigram|bpe] [--vocab N]
set -euo pipefail
cd "$(dirname "$0")/../.."
workers=$(nproc)
size_mb=32
rounds=3
model_type=unigram
vocab=8000
while (($#)); do
  case $1 in
    --workers) workers=$2; shift 2 ;;
    --size) size_mb=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --model-type) model_type=$2; shift 2 ;;
    --vocab) vocab=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
python=${XTRAIN_PYTHON:-.venv/bin/python3}
bash scripts/build.sh >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Documents of 200 to 6000 bytes cut from the multilingual tokenizer text (a pure function of
# the seed and the size), one JSONL record each; the model is trained on the first 4 MB.
"$python" - "$work" "$size_mb" "$model_type" "$vocab" <<'PY' 2> "$work/setup.log" || { cat "$work/setup.log"; exit 1; }
import json, random, sys
sys.path.insert(0, "tools/data")
import sentencepiece as spm
from make_tokenizer_text import make_text
work, size_mb, model_type, vocab = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
r = random.Random(11)
with open(f"{work}/corpus.jsonl", "w", encoding="utf-8") as corpus, \
     open(f"{work}/train.txt", "w", encoding="utf-8") as train:
    written = 0
    seed = 0
    while written < size_mb * 1_000_000:
        seed += 1
        text = make_text(1_000_000, seed)
        if seed <= 4:
            train.write(text)
        start = 0
        while start < len(text):
            end = start + r.randint(200, 6000)
            line = json.dumps({"text": text[start:end]}, ensure_ascii=False) + "\n"
            corpus.write(line)
            written += len(line.encode("utf-8"))
            start = end
spm.SentencePieceTrainer.train(input=f"{work}/train.txt", model_prefix=f"{work}/spm", vocab_size=vocab,
                               model_type=model_type, character_coverage=1.0, byte_fallback=True,
                               hard_vocab_limit=False, num_threads=2)
PY
corpus_bytes=$(stat -c %s "$work/corpus.jsonl")
tokenizer="sentencepiece:$work/spm.model"

now() { date +%s.%N; }
for round in $(seq 1 "$rounds"); do
  start=$(now)
  build/xtrain data prepare --tokenizer "$tokenizer" --input "$work/corpus.jsonl" --output "$work/xtrain" \
    --workers "$workers" > "$work/xtrain-$round.log" 2> /dev/null
  awk "BEGIN { print $(now) - $start }" > "$work/xtrain-$round.seconds"
  start=$(now)
  "$python" tools/data/indexed_dataset_reference.py write --tokenizer "$tokenizer" --workers "$workers" \
    --output "$work/python" "$work/corpus.jsonl" > "$work/python-$round.log"
  awk "BEGIN { print $(now) - $start }" > "$work/python-$round.seconds"
  cmp "$work/xtrain.idx" "$work/python.idx"
  cmp "$work/xtrain.bin" "$work/python.bin"
done

"$python" - "$work" "$rounds" "$workers" "$corpus_bytes" "$model_type" "$vocab" <<'PY'
import re, statistics, sys
work, rounds, workers, corpus_bytes, model_type, vocab = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6]
tokens = int(re.search(r"documents, (\d+) tokens", open(f"{work}/xtrain-1.log").read()).group(1))
documents = int(re.search(r": (\d+) documents", open(f"{work}/xtrain-1.log").read()).group(1))
seconds = {engine: [float(open(f"{work}/{engine}-{r}.seconds").read()) for r in range(1, rounds + 1)]
           for engine in ("xtrain", "python")}
print(f"{corpus_bytes / 1e6:.1f} MB JSONL, {documents} documents, {tokens / 1e6:.2f} M tokens; SentencePiece "
      f"{model_type}, vocab {vocab}; {workers} workers; {rounds} alternating rounds; outputs byte-identical")
print()
print("| engine | seconds (median, wall) | M tokens/s | MB/s |")
print("|---|---|---|---|")
labels = {"xtrain": "xtrain data prepare (threads)", "python": "Python sentencepiece, multiprocessing Pool"}
for engine in ("xtrain", "python"):
    s = statistics.median(seconds[engine])
    print(f"| {labels[engine]} | {s:.2f} | {tokens / s / 1e6:.3f} | {corpus_bytes / s / 1e6:.2f} |")
ratios = [p / x for x, p in zip(seconds["xtrain"], seconds["python"])]
print()
print(f"ratio xtrain / Python tokens/s: {statistics.median(ratios):.2f} (rounds {min(ratios):.2f}-{max(ratios):.2f})")
PY

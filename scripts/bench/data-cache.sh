#!/usr/bin/env bash
# What data.cache_dir saves at start: a generated JSONL corpus (tools/data/make_bench_corpus.py,
# seeded) tokenized with a Hugging Face byte-level BPE tokenizer.json (trained on a sample of it
# by tools/data/train_hf_bpe.py), 2 ranks (xtrain launch), a few steps of a tiny model. Three
# runs: no cache (each rank tokenizes the corpus into memory), a cold cache (one rank tokenizes
# into the cache while the other waits, then both map the entry) and a warm cache (both map it).
# Prints, per run, the seconds from the launch to the end of the first step (metrics.jsonl's
# first line appearing) and the data wait per step (metrics.jsonl data_wait_s), and the ratio of
# the start without a cache to the warm start. Everything lives in a temporary folder, removed
# at the end.
#   scripts/bench/data-cache.sh [--size MB] [--steps N]
set -euo pipefail
cd "$(dirname "$0")/../.."
size_mb=1000
steps=4
while (($#)); do
  case $1 in
    --size) size_mb=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
source scripts/lib/bench.sh

now() { date +%s.%N; }
start=$(now)
"$python" tools/data/make_bench_corpus.py "$work/corpus.jsonl" "$size_mb" --sample "$work/sample.txt" 200000
"$python" tools/data/train_hf_bpe.py "$work/sample.txt" "$work/tokenizers" 2000 > /dev/null
echo "corpus: $(stat -c %s "$work/corpus.jsonl") bytes, generated in $(awk "BEGIN { printf \"%.0f\", $(now) - $start }") s"
cat > "$work/recipe.yaml" <<YAML
name: data-cache-bench
data:
  train: $work/corpus.jsonl
  tokenizer: hf:$work/tokenizers/gpt2.json
  seq_len: 256
model:
  hidden_size: 64
  num_layers: 2
  num_heads: 4
train:
  steps: $steps
  global_batch_size: 8
  micro_batch_size: 4
  log_every: 1
checkpoint:
  resume: never
YAML

# run LABEL [--set ...]: 2 ranks; the seconds to the first step go to $work/LABEL.first_step.
run() {
  local label=$1
  shift
  local dir=$work/$label
  local started
  started=$(now)
  "$xtrain" launch --nproc-per-node 2 -- train "$work/recipe.yaml" --set run.dir="$dir" "$@" > "$work/$label.log" 2>&1 &
  local launcher=$!
  until [[ -s $dir/metrics.jsonl ]] || ! kill -0 "$launcher" 2> /dev/null; do sleep 0.02; done
  awk "BEGIN { print $(now) - $started }" > "$work/$label.first_step"
  wait "$launcher" || { cat "$work/$label.log"; exit 1; }
  awk "BEGIN { print $(now) - $started }" > "$work/$label.total"
  grep "data cache:" "$work/$label.log" | sed "s|$work|\$work|g; s/^/  $label: /" || true
}
run none
run cold --set data.cache_dir="$work/cache"
run warm --set data.cache_dir="$work/cache"
echo "cache: $(du -sh "$work/cache" | cut -f1) for the entry"

"$python" - "$work" "$steps" <<'PY'
import json, sys
work, steps = sys.argv[1], int(sys.argv[2])
print()
print("| run | start to first step (s) | whole run (s) | data wait per step, mean (ms) | max (ms) |")
print("|---|---|---|---|---|")
first = {}
for label, name in [("none", "no cache"), ("cold", "cold cache"), ("warm", "warm cache")]:
    first[label] = float(open(f"{work}/{label}.first_step").read())
    total = float(open(f"{work}/{label}.total").read())
    records = [json.loads(line) for line in open(f"{work}/{label}/metrics.jsonl") if '"loss"' in line]
    wait = [r["data_wait_s"] for r in records]
    print(f"| {name} | {first[label]:.2f} | {total:.2f} | {1000 * sum(wait) / len(wait):.3f} | {1000 * max(wait):.3f} |")
print()
print(f"warm start {first['none'] / first['warm']:.1f}x faster than no cache; cold start "
      f"{first['none'] / first['cold']:.2f}x")
losses = {label: [json.loads(line)["loss"] for line in open(f"{work}/{label}/metrics.jsonl") if '"loss"' in line]
          for label in ("none", "cold", "warm")}
print("losses identical in all three runs" if losses["none"] == losses["cold"] == losses["warm"]
      else f"LOSSES DIFFER: {losses}")
PY

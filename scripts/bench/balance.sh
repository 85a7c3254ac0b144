#!/usr/bin/env bash
# DP load balancing on a skewed corpus: JSONL documents whose lengths follow a log-normal
# distribution (median 150 bytes, a long tail up to whole sequences, the shape of web text),
# packed into 2048-token sequences (data.pack) with the byte tokenizer. `xtrain data balance`
# then prints, for 2, 4 and 8 data-parallel ranks, the costliest rank's attention cost over
# the mean rank's per step, without balancing and with data.balance_window. Then it trains
# recipes/bench-packed.yaml (4 layers, hidden 128) on the same data as 2 ranks, 12 steps of 8 x 2048 tokens,
# without balancing and with windows of 4 steps, in alternating rounds, and prints what the ranks
# measured: the busiest rank's compute time over the mean (metrics.jsonl busy_s_max / busy_s_mean).
#   scripts/bench/balance.sh [--window N] [--steps N] [--seq-len N] [--global-batch N] [--rounds N]
set -euo pipefail
cd "$(dirname "$0")/../.."
window=16
steps=64
seq_len=2048
global_batch=32
rounds=2
while (($#)); do
  case $1 in
    --window) window=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --seq-len) seq_len=$2; shift 2 ;;
    --global-batch) global_batch=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
bash scripts/build.sh >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Enough documents for the steps measured (one epoch of samples), a pure function of the seed.
"${XTRAIN_PYTHON:-.venv/bin/python3}" tools/data/make_skewed_corpus.py "$work/skewed.jsonl" $((steps * global_batch * (seq_len + 1) * 11 / 10))
cat > "$work/balance.yaml" <<YAML
name: bench-balance
data:
  train: $work/skewed.jsonl
  tokenizer: byte
  seq_len: $seq_len
  pack: true
  balance_window: $window
train:
  steps: $steps
  global_batch_size: $global_batch
  micro_batch_size: 1
YAML
build/xtrain data balance "$work/balance.yaml" --ranks 2,4,8 --steps "$steps"

echo
echo "| 2 ranks, 12 steps, round | busiest rank over the mean, without balancing | with balance_window 4 |"
echo "|---|---|---|"
for round in $(seq 1 "$rounds"); do
  row="| $round |"
  for window in 0 4; do
    rm -rf "$work/run"
    build/xtrain launch --nproc-per-node 2 -- train recipes/bench-packed.yaml --set run.dir="$work/run" \
      --set data.train="$work/skewed.jsonl" --set data.balance_window=$window > "$work/train.log" 2>&1 || { cat "$work/train.log"; exit 1; }
    row+=" $("${XTRAIN_PYTHON:-.venv/bin/python3}" -c '
import json, statistics, sys
records = [json.loads(line) for line in open(sys.argv[1]) if "busy_s_max" in line][1:]  # step 1 warms up
print("%.3f" % statistics.mean(r["busy_s_max"] / r["busy_s_mean"] for r in records))' "$work/run/metrics.jsonl") |"
  done
  echo "$row"
done

#!/usr/bin/env bash
# Does the background loader keep up? Trains recipes/bench-packed.yaml (4 layers, hidden 128) on
# the skewed corpus of tools/data/make_skewed_corpus.py, packed into 2048-token sequences and
# balanced (data.balance_window 4), where steps are short and reading, packing and balancing are the
# largest share they ever are. Prints the loader thread's time to read a step (metrics.jsonl
# data_read_s) and the training loop's time waiting on it (data_wait_s) against the step time,
# for 1 process and for 2 ranks (FSDP 2).
#   scripts/bench/loader.sh [--steps N]
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=12
while (($#)); do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
bash scripts/build.sh >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"${XTRAIN_PYTHON:-.venv/bin/python3}" tools/data/make_skewed_corpus.py "$work/skewed.jsonl" 4000000
report() {  # report LABEL RUN_DIR
  "${XTRAIN_PYTHON:-.venv/bin/python3}" - "$1" "$2/metrics.jsonl" <<'PY'
import json, statistics, sys
label, path = sys.argv[1], sys.argv[2]
records = [json.loads(line) for line in open(path) if '"loss"' in line][1:]  # step 1 warms up
wait = [r["data_wait_s"] for r in records]
read = [r["data_read_s"] for r in records]
step = [r["step_s"] for r in records]
print(f"| {label} | {len(records)} | {statistics.median(step):.2f} s | {statistics.median(read) * 1000:.1f} ms | "
      f"{statistics.mean(wait) * 1e6:.1f} us | {max(wait) * 1e6:.1f} us | {100 * sum(wait) / sum(step):.4f}% |")
PY
}
data=(--set data.train="$work/skewed.jsonl" --set data.balance_window=4 --set train.steps="$steps")
build/xtrain train recipes/bench-packed.yaml --set run.dir="$work/single" "${data[@]}" > "$work/single.log" 2>&1 || { cat "$work/single.log"; exit 1; }
build/xtrain launch --nproc-per-node 2 -- train recipes/bench-packed.yaml --set run.dir="$work/fsdp2" "${data[@]}" \
  > "$work/fsdp2.log" 2>&1 || { cat "$work/fsdp2.log"; exit 1; }
echo "| run | steps | median step | median read per step (loader thread) | mean wait | max wait | waiting share |"
echo "|---|---|---|---|---|---|---|"
report "1 process" "$work/single"
report "FSDP 2 (rank 0)" "$work/fsdp2"

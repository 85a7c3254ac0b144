#!/usr/bin/env bash
# Domino-EP on this machine: recipes/moe-demo.yaml (8 experts, top 2) under expert parallelism
# over 2 ranks, its micro batches of 8 x 256 tokens exchanged whole (parallel.intra_layer_micro_batch
# 1) and in 2 parts whose all-to-alls overlap each other's expert compute (2). Reports, for
# steps 6-30 of each run, the mean step time and the time rank 0 spent blocked on the expert
# all-to-alls, in forward (moe.all_to_all_wait_s: the counts, and the rows both ways) and in
# backward (moe.all_to_all_backward_wait_s: the rows' gradients both ways), as ratios against
# N = 1 measured in the same invocation.
#   scripts/bench/moe.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/bench.sh

for parts in 1 2; do
  "$xtrain" launch --nproc-per-node 2 --master-port "$(port)" -- train recipes/moe-demo.yaml \
    --set run.dir="$work/n$parts" --set parallel.ep=2 --set parallel.intra_layer_micro_batch=$parts \
    --set data.seq_len=256 --set train.steps=30 --set train.threads=1 --set train.eval_every=0 \
    --set checkpoint.every=0 > "$work/n$parts.log" 2>&1 || { cat "$work/n$parts.log" >&2; exit 1; }
done

"$python" - "$work" <<'PY'
import json, sys
work = sys.argv[1]
def figures(parts):
    steps = [json.loads(l) for l in open(f"{work}/n{parts}/metrics.jsonl") if '"loss"' in l][5:]
    mean = lambda key: sum(r[key] for r in steps) / len(steps)
    return (mean("step_s"), mean("moe.all_to_all_wait_s"), mean("moe.all_to_all_backward_wait_s"),
            steps[-1]["loss"])
base = figures(1)
print("| EP 2, moe-demo, 8 x 256 tokens per micro batch | step (s) | blocked, forward (s/step) "
      "| blocked, backward (s/step) | vs N = 1 (step / forward / backward) | loss at step 30 |")
print("|---|---|---|---|---|---|")
for parts in (1, 2):
    step, forward, backward, loss = figures(parts)
    print(f"| intra_layer_micro_batch {parts} | {step:.4f} | {forward:.4f} | {backward:.4f} "
          f"| {step / base[0]:.2f} / {forward / base[1]:.2f} / {backward / base[2]:.2f} | {loss:.4f} |")
PY

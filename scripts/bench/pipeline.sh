#!/usr/bin/env bash
# Pipeline parallelism on this machine, an 8-layer model (hidden 128, 128 tokens per micro batch
# of 1 sequence), 6 steps per run, steps 3-6 averaged:
#   bubble: each stage's time blocked on its neighbours (pp.idle_s_by_stage) as a fraction of the
#           step, for PP 2 and PP 4 with m = 4, 8 and 16 micro batches, under 1f1b and under
#           interleaved_1f1b with 2 chunks per rank, beside the ideal (p-1)/(m+p-1) and
#           (p-1)/(vm+p-1);
#   memory: with m = 8 and 512-token sequences, the most micro batches each stage holds at once
#           (pp.in_flight_by_stage) and its peak resident memory, under gpipe and 1f1b.
#   scripts/bench/pipeline.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/bench.sh

cat > "$work/recipe.yaml" <<YAML
name: bench-pipeline
model: {hidden_size: 128, num_layers: 8, num_heads: 4}
data: {seq_len: 128}
train: {steps: 6, micro_batch_size: 1, log_every: 1, threads: 1, eval_every: 0}
optim: {warmup_steps: 1}
checkpoint: {every: 0}
parallel: {fsdp: 1}
YAML
run() {  # NAME PP [--set ...]
  local name=$1 pp=$2
  shift 2
  "$xtrain" launch --nproc-per-node "$pp" --master-port "$(port)" -- train "$work/recipe.yaml" \
    --set run.dir="$work/$name" --set parallel.pp="$pp" "$@" > "$work/$name.log" 2>&1 || { cat "$work/$name.log" >&2; exit 1; }
}
for pp in 2 4; do
  for m in 4 8 16; do
    run "p${pp}_m${m}_1f1b" "$pp" --set train.global_batch_size="$m"
    run "p${pp}_m${m}_interleaved" "$pp" --set train.global_batch_size="$m" \
      --set parallel.pp_schedule=interleaved_1f1b --set parallel.pp_virtual_stages=2
  done
  for schedule in gpipe 1f1b; do
    run "p${pp}_memory_${schedule}" "$pp" --set train.global_batch_size=8 --set data.seq_len=512 \
      --set parallel.pp_schedule="$schedule"
  done
done

"$python" - "$work" <<'PY'
import json, sys
work = sys.argv[1]
def steps(name):
    return [json.loads(l) for l in open(f"{work}/{name}/metrics.jsonl") if '"loss"' in l][2:]
def mean_idle(name):
    rows = steps(name)
    stages = len(rows[0]["pp.idle_s_by_stage"])
    return [sum(r["pp.idle_s_by_stage"][s] / r["step_s"] for r in rows) / len(rows) for s in range(stages)]
print("| pp | m | 1f1b idle per stage | mean | ideal (p-1)/(m+p-1) | interleaved v=2 idle per stage | mean | ideal (p-1)/(2m+p-1) |")
print("|---|---|---|---|---|---|---|---|")
for p in (2, 4):
    for m in (4, 8, 16):
        a, b = mean_idle(f"p{p}_m{m}_1f1b"), mean_idle(f"p{p}_m{m}_interleaved")
        fmt = lambda xs: " / ".join(f"{x:.2f}" for x in xs)
        print(f"| {p} | {m} | {fmt(a)} | {sum(a)/len(a):.2f} | {(p-1)/(m+p-1):.2f} | {fmt(b)} | {sum(b)/len(b):.2f} "
              f"| {(p-1)/(2*m+p-1):.2f} |")
print()
print("| pp | schedule (m = 8) | micro batches held at once, by stage | peak resident MiB, by stage |")
print("|---|---|---|---|")
for p in (2, 4):
    for schedule in ("gpipe", "1f1b"):
        last = steps(f"p{p}_memory_{schedule}")[-1]
        held = " / ".join(str(int(x)) for x in last["pp.in_flight_by_stage"])
        rss = " / ".join(f"{x:.0f}" for x in last["pp.peak_rss_mib_by_stage"])
        print(f"| {p} | {schedule} | {held} | {rss} |")
PY

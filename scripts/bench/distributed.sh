#!/usr/bin/env bash
# FSDP on this machine, with recipes/bench-fsdp.yaml (58M parameters):
#  1. memory: parameters + gradients + optimizer state held per rank (the peak over the run,
#     gathered blocks included) with 1, 2 and 4 ranks, against total / N;
#  2. throughput: tokens/s of FSDP 2 (one thread per rank) against one process (two threads)
#     on the same global batch, in alternating rounds, and the seconds per step each FSDP rank
#     spent blocked on collectives (communication that did not overlap compute).
# Step 1 is a warm-up and left out of the rates.
#   scripts/bench/distributed.sh [--rounds N]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=2
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
source scripts/lib/bench.sh
recipe=$PWD/recipes/bench-fsdp.yaml

run() {  # run NAME NPROC THREADS
  local name=$1 nproc=$2 threads=$3
  local status=0
  if [[ $nproc == 1 ]]; then
    "$xtrain" train "$recipe" --set run.dir="$work/$name" --set train.threads="$threads" > "$work/$name.log" 2>&1 || status=$?
  else
    "$xtrain" launch --nproc-per-node "$nproc" --master-port "$(port)" -- train "$recipe" \
      --set run.dir="$work/$name" --set train.threads="$threads" > "$work/$name.log" 2>&1 || status=$?
  fi
  if ((status)); then
    cat "$work/$name.log" >&2
    exit "$status"
  fi
}

for round in $(seq 1 "$rounds"); do
  run "single-$round" 1 2
  run "fsdp2-$round" 2 1
done
run fsdp4 4 1

"${XTRAIN_PYTHON:-.venv/bin/python3}" - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def records(name):
    return [json.loads(l) for l in open(f"{work}/{name}/metrics.jsonl") if '"loss"' in l]
params = None
for line in open(f"{work}/single-1.log"):
    if line.startswith("model: "):
        params = int(line.split()[1])
total_mib = 16 * params / 2**20  # fp32 parameters, gradients, two AdamW moments
print(f"\nmodel: {params / 1e6:.1f}M parameters; parameters + gradients + optimizer state = {total_mib:.0f} MiB in all")
print(f"\n| ranks | per-rank state, measured (MiB) | total / N (MiB) | measured / (total / N) |")
print("|---|---|---|---|")
for n, name in [(1, "single-1"), (2, "fsdp2-1"), (4, "fsdp4")]:
    measured = max(r["state_mib"] for r in records(name))
    print(f"| {n} | {measured:.0f} | {total_mib / n:.0f} | {measured / (total_mib / n):.2f} |")

def rate(name):
    rs = records(name)[1:]
    return statistics.median(r["tokens_per_s"] for r in rs), statistics.median(r["comm_wait_s"] for r in rs), statistics.median(r["step_s"] for r in rs)
single = [rate(f"single-{i}") for i in range(1, rounds + 1)]
fsdp2 = [rate(f"fsdp2-{i}") for i in range(1, rounds + 1)]
s_rate = statistics.median(r[0] for r in single)
f_rate = statistics.median(r[0] for r in fsdp2)
f_wait = statistics.median(r[1] for r in fsdp2)
f_step = statistics.median(r[2] for r in fsdp2)
print(f"\n| layout (same global batch, 2 cores) | tokens/s | ratio | step (s) | waiting on collectives per step (s) |")
print("|---|---|---|---|---|")
print(f"| 1 process, 2 threads | {s_rate:.0f} | 1.00 | {statistics.median(r[2] for r in single):.2f} | 0 |")
print(f"| FSDP 2, 1 thread per rank | {f_rate:.0f} | {f_rate / s_rate:.2f} | {f_step:.2f} | {f_wait:.3f} ({100 * f_wait / f_step:.1f}% of the step) |")
PY

#!/usr/bin/env bash
# What a checkpoint costs the steps, synchronous against background saves (checkpoint.async), on
# recipes/bench-fsdp.yaml (58M parameters, 0.7 GB of state; in fp32, since this CPU has no native
# bf16) with FSDP 2: 12 steps saving every 3,
# against the same 12 steps without periodic saves, in alternating rounds. The cost of a save is
# the time it added to steps 2-11 (the steps' own time plus the time the saves held them up,
# less the run without saves) divided by the 3 saves; the final save at step 12 is left out.
#   scripts/bench/checkpoint.sh [--rounds N]
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
run() {  # NAME EVERY ASYNC
  "$xtrain" launch --nproc-per-node 2 --master-port "$(port)" -- train recipes/bench-fsdp.yaml \
    --set run.dir="$work/$1" --set train.steps=12 --set train.threads=1 --set train.dtype=fp32 --set checkpoint.every="$2" \
    --set checkpoint.async="$3" --set checkpoint.keep=2 > "$work/$1.log" 2>&1 || { cat "$work/$1.log" >&2; exit 1; }
}
for round in $(seq 1 "$rounds"); do
  run none-$round 0 false
  run sync-$round 3 false
  run async-$round 3 true
  echo "round $round of $rounds done" >&2
done
"${XTRAIN_PYTHON:-.venv/bin/python3}" - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def load(name):
    records = [json.loads(line) for line in open(f"{work}/{name}/metrics.jsonl")]
    steps = sum(r["step_s"] for r in records if "loss" in r and 2 <= r["step"] <= 11)
    saves = [r for r in records if "checkpoint" in r and r["step"] < 12]
    return steps, sum(r["checkpoint_blocking_s"] for r in saves), [r["checkpoint_write_s"] for r in saves]
rows = {}
for mode in ("sync", "async"):
    costs, blocking, writes = [], [], []
    for round in range(1, rounds + 1):
        base, _, _ = load(f"none-{round}")
        steps, held, written = load(f"{mode}-{round}")
        costs.append((steps + held - base) / 3)
        blocking.append(held / 3)
        writes += written
    rows[mode] = (statistics.median(costs), statistics.median(blocking), statistics.median(writes))
base = statistics.median(load(f"none-{r}")[0] / 10 for r in range(1, rounds + 1))
print(f"step time without saves: {base:.2f} s (median over {rounds} rounds)")
print("| saves | cost per save | held the steps | write | ")
print("|---|---|---|---|")
for mode, (cost, held, write) in rows.items():
    print(f"| {mode} | {cost:.2f} s | {held:.2f} s | {write:.2f} s |")
print(f"async / sync time the steps were held per save: {rows['async'][1] / rows['sync'][1]:.3f}")
print("(the cost per save is within the rounds' noise when it is small against the step time)")
PY

#!/usr/bin/env bash
# Memory per rank of a Llama-3.2-1B-shaped model (recipes/llama-3.2-1b-shape.yaml, 1.24B
# parameters, fp32 parameters and AdamW state: 16 bytes a parameter) under FSDP 4. The model is
# built without parameter storage and each rank draws only its shards, so no rank ever holds the
# whole model. Two runs:
#   1. set up and not trained (--setup-only): each rank's peak resident memory;
#   2. one training step, with full recompute: each rank's peak footprint (memory allocated,
#      resident or swapped out, sampled every 10 ms by tools/bench/sample_memory.py).
# Four ranks of run 2 hold about 36 GiB together: on a machine with less memory, add swap first
# (the script says how); the footprint does not depend on how much of it stays resident.
# The bound checked: peak <= 1.1 x (whole state / 4) + the units in flight (gathered parameters
# and full gradients, the trainer's own count) + the runtime that a process without a model
# already takes (measured with the demo recipe).
#   scripts/bench/start-memory.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/bench.sh
recipe=recipes/llama-3.2-1b-shape.yaml
needed_kib=$((40 * 1024 * 1024))
have_kib=$(awk '/^(MemTotal|SwapTotal):/ { sum += $2 } END { print sum }' /proc/meminfo)
if ((have_kib < needed_kib)); then
  echo "scripts/bench/start-memory.sh: a training step of four 1.24B ranks needs 40 GiB of memory and swap; this machine" \
    "has $((have_kib / 1024 / 1024)) GiB. Add swap, e.g. as root: fallocate -l 24G /swapfile && chmod 600 /swapfile" \
    "&& mkswap /swapfile && swapon /swapfile" >&2
  exit 2
fi

"$xtrain" train recipes/demo.yaml --setup-only > "$work/base.log"
"$xtrain" launch --nproc-per-node 4 --master-port "$(port)" -- train "$recipe" --set train.threads=1 \
  --set run.dir="$work/setup" --setup-only > "$work/setup.log" 2>&1 || { cat "$work/setup.log" >&2; exit 1; }
"$python" tools/bench/sample_memory.py "$work/peaks.jsonl" -- "$xtrain" launch --nproc-per-node 4 \
  --master-port "$(port)" -- train "$recipe" --set train.threads=1 --set run.dir="$work/step" \
  --set train.steps=1 --set memory.recompute=full > "$work/step.log" 2>&1 || { cat "$work/step.log" >&2; exit 1; }

"$python" - "$work" <<'PY'
import json, re, sys
work = sys.argv[1]
def start_memory(log):
    line = next(l for l in open(log) if "memory at start:" in l)
    peak, rank, mean, state, whole = re.search(
        r"peak resident (\d+) MiB \(rank (\d+); mean (\d+)\), this rank's state (\d+) MiB, the whole model's state (\d+) MiB",
        line).groups()
    params = int(re.search(r"model: (\d+) parameters", open(log).read()).group(1))
    return int(peak), int(mean), int(state), int(whole), params
base = start_memory(f"{work}/base.log")[0]
print(f"runtime of a process without a model (demo recipe, 0.85M parameters): {base} MiB")
peak, mean, state, whole, params = start_memory(f"{work}/setup.log")
bound = 1.1 * whole / 4 + base
# With FSDP 4 and AdamW a rank's state (a quarter of 16 bytes a parameter) is as large as the
# whole model's fp32 parameters: a rank that built the whole model before keeping its shards
# would have held both at once.
print(f"1. {params / 1e9:.3f}B parameters, FSDP 4, after set-up: peak resident {peak} MiB on the worst rank "
      f"(mean {mean}); its state {state} MiB (its parameters {state // 4} MiB); the whole model's state {whole} "
      f"MiB; bound 1.1 x {whole} / 4 + {base} = {bound:.0f} MiB; a rank that built the whole model first: at "
      f"least {whole // 4 + state} MiB")
assert peak <= bound, "over the bound at start-up"
assert peak < whole // 4 + state, "a rank held the whole model"

record = next(json.loads(l) for l in open(f"{work}/step/metrics.jsonl") if '"loss"' in l)
ranks = [json.loads(l) for l in open(f"{work}/peaks.jsonl")]
worst = max(r["footprint_mib"] for r in ranks)
each = ", ".join(f"{r['footprint_mib']:.0f}" for r in ranks)
in_flight = record["state_mib"] - state
bound = 1.1 * whole / 4 + in_flight + base
print(f"2. the same, one step (loss {record['loss']:.4f}, {record['step_s']:.0f} s): peak footprint "
      f"{worst:.0f} MiB on the worst rank (ranks: {each}); its "
      f"state {state} MiB, units in flight at most {in_flight:.0f} MiB (rank 0: gathered parameters and full "
      f"gradients); bound 1.1 x {whole} / 4 + {in_flight:.0f} + {base} = {bound:.0f} MiB; the whole model's "
      f"parameters alone {whole // 4} MiB, its state {whole} MiB")
assert worst <= bound, "over the bound after a step"
PY

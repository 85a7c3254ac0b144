#!/usr/bin/env bash
# Start-up memory under FSDP 4 (recipes/llama-3.2-1b-shape.yaml, 1.24B parameters): the model is
# built without parameter storage and each rank draws only its shards, so no rank ever holds the
# whole model. Prints each rank's peak resident memory beside the whole model's state.
#   1. the 1.24B model, set up and not trained (--setup-only): its state is 18.4 GiB, and during
#      a step each rank also holds the tied 128K x 2048 embedding gathered, its full gradient and
#      their collectives' buffers (about 1.5 GiB more per rank than fits in this machine's 24 GiB
#      over four ranks, measured with a 2-block sibling);
#   2. the same blocks, 4 of them, with a 32K vocabulary (309M parameters), after its first step.
# The bound checked at start-up: peak <= 1.1 x (whole state / 4) + the runtime that a process
# without a model already takes (measured here with the demo recipe). After a step the peak is
# broken down into state, units in flight and the rest.
#   scripts/bench-start-memory.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/bench.sh
recipe=recipes/llama-3.2-1b-shape.yaml

"$xtrain" train recipes/demo.yaml --setup-only > "$work/base.log"
"$xtrain" launch --nproc-per-node 4 --master-port "$(port)" -- train "$recipe" --set train.threads=1 \
  --set run.dir="$work/setup" --setup-only > "$work/setup.log" 2>&1 || { cat "$work/setup.log" >&2; exit 1; }
"$xtrain" launch --nproc-per-node 4 --master-port "$(port)" -- train "$recipe" --set train.threads=1 \
  --set run.dir="$work/step" --set model.num_layers=4 --set model.vocab_size=32000 --set train.steps=1 \
  > "$work/step.log" 2>&1 ||
  { cat "$work/step.log" >&2; exit 1; }

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
assert peak <= bound, "over the bound"
assert peak < whole // 4 + state, "a rank held the whole model"
peak0, mean0, state0, whole0, params0 = start_memory(f"{work}/step.log")
record = [json.loads(l) for l in open(f"{work}/step/metrics.jsonl") if '"loss"' in l][0]
in_flight = record["state_mib"] - state0
rest = record["peak_rss_mib"] - record["state_mib"] - base
print(f"2. {params0 / 1e9:.3f}B parameters (4 blocks, vocabulary 32000), FSDP 4: after set-up {peak0} MiB on the "
      f"worst rank (bound 1.1 x {whole0} / 4 + {base} = {1.1 * whole0 / 4 + base:.0f}); after step 1 rank 0's peak "
      f"resident {record['peak_rss_mib']:.0f} MiB: its state at most {record['state_mib']:.0f} MiB ({state0} MiB "
      f"of shards and AdamW moments, {in_flight:.0f} MiB of gathered units and full gradients in flight), the "
      f"runtime {base} MiB, and {rest:.0f} MiB of activations, collective buffers and heap kept for reuse")
assert peak0 <= 1.1 * whole0 / 4 + base, "over the bound at start-up"
PY

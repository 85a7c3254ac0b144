#!/usr/bin/env bash
# Memory per rank of a mixture of experts under expert parallelism: recipes/moe-demo.yaml scaled
# to 32 experts (its experts then hold 95% of its parameters) on 4 ranks, with ep 1, 2 and 4.
# With ep > 1 each rank keeps 1/ep of every layer's experts, sharded over the other 4/ep ranks
# (FSDP-first, as XTuner): its expert state (fp32 parameters, gradients, AdamW's two moments)
# is a quarter of the whole, and a layer's forward and backward gather only its 1/ep share,
# over 4/ep ranks. Replicated (DDP 4), ep 1 keeps every expert on every rank; sharded (FSDP 4)
# the state is a quarter either way, but ep 1 gathers each layer's experts whole.
# Each run trains 2 steps; the figures are rank 0's, from its log and metrics.jsonl.
#   scripts/bench/moe-memory.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/bench.sh

for layout in ddp fsdp; do
  for ep in 1 2 4; do
    degrees=(--set parallel.dp=1 --set parallel.fsdp=4)
    [[ $layout == ddp ]] && degrees=(--set parallel.dp=4 --set parallel.fsdp=1)
    "$xtrain" launch --nproc-per-node 4 --master-port "$(port)" -- train recipes/moe-demo.yaml \
      --set run.dir="$work/${layout}_ep$ep" --set model.num_experts=32 --set parallel.ep=$ep "${degrees[@]}" \
      --set train.steps=2 --set train.micro_batch_size=4 --set optim.warmup_steps=0 --set train.threads=1 --set train.eval_every=0 --set checkpoint.every=0 \
      > "$work/${layout}_ep$ep.log" 2>&1 || { cat "$work/${layout}_ep$ep.log" >&2; exit 1; }
  done
done

"$python" - "$work" <<'PY'
import json, re, sys
work = sys.argv[1]
print("| layout (4 ranks) | ep | rank 0's state at start (MiB) | peak state with gathered units (MiB) | vs ep 1 |")
print("|---|---|---|---|---|")
for layout in ("ddp", "fsdp"):
    first = None
    for ep in (1, 2, 4):
        log = open(f"{work}/{layout}_ep{ep}.log").read()
        state = float(re.search(r"this rank's state (\d+) MiB", log).group(1))
        peak = max(json.loads(l)["state_mib"] for l in open(f"{work}/{layout}_ep{ep}/metrics.jsonl") if '"loss"' in l)
        first = first or (state, peak)
        print(f"| {layout.upper()} 4 | {ep} | {state:.0f} | {peak:.1f} | {state / first[0]:.2f} / {peak / first[1]:.2f} |")
PY

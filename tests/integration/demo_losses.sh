#!/usr/bin/env bash
# The demo recipe's first 20 losses agree within 1e-4 relative with those recorded in
# tests/data/demo_losses.txt, with the attention kernel that auto picks and with the naive one:
# the data order, the init, the model and the optimizer compute what they computed.
set -euo pipefail
xtrain=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for attention in auto naive; do
  "$xtrain" train "$root/recipes/demo.yaml" --set run.dir="$work/$attention" --set memory.attention=$attention \
    --set train.log_every=20 --stop-at-step 20 > "$work/$attention.log"
  python3 - "$root/tests/data/demo_losses.txt" "$work/$attention/metrics.jsonl" "$attention" <<'PY'
import json, sys
baseline = [float(line.split()[1]) for line in open(sys.argv[1]) if line.strip() and not line.startswith("#")]
losses = [json.loads(line)["loss"] for line in open(sys.argv[2]) if '"loss"' in line]
assert len(losses) == len(baseline) == 20, (len(losses), len(baseline))
worst = max(range(20), key=lambda i: abs(losses[i] - baseline[i]) / baseline[i])
rel = abs(losses[worst] - baseline[worst]) / baseline[worst]
print(f"demo losses, attention {sys.argv[3]}: worst relative difference to the recorded ones {rel:.2e} at step {worst + 1}")
assert rel <= 1e-4, f"step {worst + 1}: {losses[worst]} vs {baseline[worst]}"
PY
done

#!/usr/bin/env bash
# Peak memory and step time of recipes/long-context-64k.yaml (2 layers, hidden 256, vocabulary
# 32000, bf16) with its memory options, with recompute off, and with chunked loss off. Each
# variant trains one step at 8192 and 16384 tokens in its own process; since every term of a
# step's memory grows linearly with the sequence here (blockwise attention keeps no [T x T]
# tensor), the peak at 65,536 tokens is extrapolated from those two points. --full also runs
# the recipe itself at 65,536 tokens (two steps; tens of minutes on 2 cores) so the
# extrapolation can be checked against a measurement.
#   scripts/bench/long-context.sh [--full]
set -euo pipefail
cd "$(dirname "$0")/../.."
full=0
while (($#)); do
  case $1 in
    --full) full=1; shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
bash scripts/build.sh > /dev/null
recipe=recipes/long-context-64k.yaml
work=${WORK_DIR:-$(mktemp -d)}
mkdir -p "$work"
run() {  # run NAME SEQ [--set ...]
  local name=$1 seq=$2
  shift 2
  build/xtrain train "$recipe" --set run.dir="$work/$name" --set data.seq_len="$seq" "$@" > "$work/$name.log"
}
for seq in 8192 16384; do
  run "recipe-$seq" $seq --set train.steps=1
  run "no-recompute-$seq" $seq --set train.steps=1 --set memory.recompute=none
  run "no-chunked-loss-$seq" $seq --set train.steps=1 --set memory.chunked_loss=off
done
if ((full)); then run "recipe-65536" 65536; fi

"${XTRAIN_PYTHON:-.venv/bin/python3}" - "$work" <<'PY'
import json, os, sys
work = sys.argv[1]
def first_step(name):
    r = [json.loads(l) for l in open(f"{work}/{name}/metrics.jsonl") if '"loss"' in l]
    return max(x["peak_rss_mib"] for x in r), r[0]["step_s"]
print("\n| variant | peak 8192 (MiB) | peak 16384 (MiB) | peak 65536 (MiB) | step at 16384 (s) |")
print("|---|---|---|---|---|")
for variant, label in [("recipe", "recipe: blockwise attention, chunked loss, full recompute"),
                       ("no-recompute", "memory.recompute: none"),
                       ("no-chunked-loss", "memory.chunked_loss: off")]:
    m8, _ = first_step(f"{variant}-8192")
    m16, t16 = first_step(f"{variant}-16384")
    slope = (m16 - m8) / 8192
    estimate = m16 + slope * (65536 - 16384)
    cell = f"~{estimate:.0f} (extrapolated)"
    if variant == "recipe" and os.path.exists(f"{work}/recipe-65536/metrics.jsonl"):
        r = [json.loads(l) for l in open(f"{work}/recipe-65536/metrics.jsonl") if '"loss"' in l]
        cell = f"{max(x['peak_rss_mib'] for x in r):.0f} measured, {estimate:.0f} extrapolated; step {r[-1]['step_s']:.0f} s"
    print(f"| {label} | {m8:.0f} | {m16:.0f} | {cell} | {t16:.1f} |")
PY

#!/usr/bin/env bash
# Muon's cost against AdamW on the demo recipe (recipes/demo.yaml, 0.85M parameters, 28 hidden
# matrices), 2 ranks on this machine, under FSDP 2 and under TP 2: the median step time and the
# median time blocked on the mesh's groups (comm_wait_s) from step 6 of 40, micro batch 8, and
# Muon's ratios to AdamW in the same invocation. Muon's extra traffic is the assembly of its
# matrices: an all-reduce of each whole matrix (fp32) over the shard group (FSDP) or the tp group
# (TP), of which a ring sends 2 x (N-1)/N per rank; the figure comes from the matrices' parameter
# count that the run prints.
#   scripts/bench/muon.sh [--steps 40] [--ns-dtype bf16|fp32]
set -euo pipefail
cd "$(dirname "$0")/../.."
srcdir=$PWD
steps=40 ns_dtype=bf16
while (($#)); do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --ns-dtype) ns_dtype=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
xtrain=${XTRAIN:-$srcdir/build/xtrain}
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
source tests/integration/lib/distributed.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

run() {  # run NAME ARGS...: 2 ranks of the demo recipe
  local name=$1
  shift
  "$xtrain" launch --nproc-per-node 2 --master-port "$(free_port)" -- train recipes/demo.yaml \
    --set run.dir="$work/$name" --set train.steps="$steps" --set train.micro_batch_size=8 --set train.log_every=10 \
    --set train.eval_every=0 --set checkpoint.every=0 "$@" > "$work/$name.log" 2>&1 || { cat "$work/$name.log"; exit 1; }
}
muon=(--set optim.name=muon --set optim.muon.ns_dtype="$ns_dtype")
for layout in "fsdp2 parallel.fsdp=2" "tp2 parallel.tp=2"; do
  read -r name set <<< "$layout"
  run "$name-adamw" --set "$set"
  run "$name-muon" --set "$set" "${muon[@]}"
done
"$python" - "$work" <<'PY'
import json, re, statistics, sys
work = sys.argv[1]
def medians(run):
    rows = [r for r in map(json.loads, open(f"{work}/{run}/metrics.jsonl")) if "step_s" in r and r["step"] >= 6]
    return statistics.median(r["step_s"] for r in rows), statistics.median(r["comm_wait_s"] for r in rows)
for layout, group in (("fsdp2", "shard group"), ("tp2", "tp group")):
    a_step, a_wait = medians(f"{layout}-adamw")
    m_step, m_wait = medians(f"{layout}-muon")
    line = open(f"{work}/{layout}-muon.log").read()
    found = re.search(r"optim: muon on (\d+) matrices \((\d+) parameters", line)
    matrices, elements = int(found[1]), int(found[2])
    sent = elements * 4 * 2 * (2 - 1) / 2
    print(f"{layout}: step AdamW {a_step:.3f} s, Muon {m_step:.3f} s (x{m_step / a_step:.2f}); blocked on the groups "
          f"AdamW {a_wait:.3f} s, Muon {m_wait:.3f} s; Muon assembles {matrices} matrices, {elements} fp32 elements, "
          f"over the {group}: {sent / 1e6:.2f} MB sent per rank per step")
PY

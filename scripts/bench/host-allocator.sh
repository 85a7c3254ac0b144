#!/usr/bin/env bash
# Where CPU tensors of 64 KiB and more live: xtrain's host block pool (device/host_block_pool.h,
# the default) against malloc's heap (XTRAIN_HOST_ALLOCATOR=malloc), in turns (A B B A ...) on
# the same recipes: the median step time (steps after the first 2, every round), the fullest
# rank's peak resident memory, its peak of live tensors, and whether the per-step losses are
# bit-identical. The runs: recipes/bench-cpu.yaml on one process, and the dense and MoE recipes
# of scripts/plan-here.sh under FSDP over every core.
#   scripts/bench/host-allocator.sh [--rounds R] [--steps N] [--only NAME[,NAME...]]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=3
steps=8
only=""
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
python=${XTRAIN_PYTHON:-.venv/bin/python3}
[[ -x $python ]] || python=python3
bash scripts/build.sh >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
cores=$(nproc)
configs=("bench-cpu|1|recipes/bench-cpu.yaml" "dense-fsdp|$cores|tests/data/plan/here-dense.yaml"
         "moe-fsdp|$cores|tests/data/plan/here-moe.yaml")
if [[ -n $only ]]; then
  chosen=()
  for config in "${configs[@]}"; do [[ ",$only," == *",${config%%|*},"* ]] && chosen+=("$config"); done
  ((${#chosen[@]})) || { echo "--only $only: no such run (bench-cpu, dense-fsdp, moe-fsdp)" >&2; exit 2; }
  configs=("${chosen[@]}")
fi

run() {  # CONFIG ALLOCATOR ROUND
  local name ranks recipe dir
  IFS='|' read -r name ranks recipe <<< "$1"
  dir=$work/$name-$2-$3
  XTRAIN_HOST_ALLOCATOR=$2 build/xtrain launch --nproc-per-node "$ranks" --master-port "$(port)" -- train "$recipe" \
    --set run.dir="$dir" --set train.steps="$steps" --set checkpoint.every=0 --set train.eval_every=0 \
    > "$dir.log" 2>&1 || { tail -n 30 "$dir.log" >&2; exit 1; }
}
for config in "${configs[@]}"; do
  for ((round = 0; round < rounds; ++round)); do
    if ((round % 2 == 0)); then run "$config" malloc $round; run "$config" pool $round
    else run "$config" pool $round; run "$config" malloc $round; fi
  done
done

"$python" - "$work" "$rounds" "${configs[@]}" <<'PY'
import json, statistics, sys
work, rounds, configs = sys.argv[1], int(sys.argv[2]), [c.split("|")[0] for c in sys.argv[3:]]
def records(name, allocator, r):
    return [json.loads(l) for l in open(f"{work}/{name}-{allocator}-{r}/metrics.jsonl") if '"loss"' in l]
print("| run | allocator | median step (s) | speed vs malloc | peak resident (MiB) | peak tensors (MiB) | resident less tensors |")
print("|---|---|---|---|---|---|---|")
identical = True
for name in configs:
    rows = {}
    for allocator in ("malloc", "pool"):
        runs = [records(name, allocator, r) for r in range(rounds)]
        step = statistics.median(s["step_s"] for run in runs for s in run[2:])
        last = [run[-1] for run in runs]  # one process writes no _max (over ranks)
        rss = statistics.median(r.get("peak_rss_mib_max", r.get("peak_rss_mib")) for r in last)
        tensors = statistics.median(r.get("peak_device_mib_max", r.get("peak_device_mib")) for r in last)
        rows[allocator] = (step, rss, tensors, [[s["loss"] for s in run] for run in runs])
    identical &= all(losses == rows["malloc"][3][0] for a in rows for losses in rows[a][3])
    for allocator, (step, rss, tensors, _) in rows.items():
        speed = rows["malloc"][0] / step
        print(f"| {name} | {allocator} | {step:.4f} | {speed:.3f}x | {rss:.0f} | {tensors:.0f} | {rss - tensors:.0f} |")
print("per-step losses: " + ("bit-identical" if identical else "DIFFER"))
sys.exit(0 if identical else 1)
PY

#!/usr/bin/env bash
# Two xtrain executables on one recipe, in turns: the median step time of each (steps after the
# first 2, over every round) and whether their per-step losses are bit-identical, for a change
# meant to make a step faster without changing what it computes. Build the baseline first, for
# example by checking out its commit and copying build/xtrain aside.
#   scripts/bench/compare-executables.sh BASELINE CANDIDATE RECIPE [--nproc N] [--rounds R] [--set KEY=VALUE ...]
# Exit 1 when the losses differ. Rounds alternate the two (A B B A ...) so that a machine's
# drift is shared between them.
set -euo pipefail
cd "$(dirname "$0")/../.."
usage="usage: scripts/bench/compare-executables.sh BASELINE CANDIDATE RECIPE [--nproc N] [--rounds R] [--set KEY=VALUE ...]"
(($# >= 3)) || { echo "$usage" >&2; exit 2; }
baseline=$1 candidate=$2 recipe=$3
shift 3
nproc=2 rounds=3 sets=()
while (($#)); do
  case $1 in
    --nproc) nproc=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    *) echo "unknown argument: $1" >&2; echo "$usage" >&2; exit 2 ;;
  esac
done
for executable in "$baseline" "$candidate"; do
  [[ -x $executable ]] || { echo "$executable: not an executable (build it first)" >&2; exit 2; }
done
[[ -f $recipe ]] || { echo "$recipe: no such recipe file" >&2; exit 2; }
python=${XTRAIN_PYTHON:-.venv/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

run() {  # NAME EXECUTABLE ROUND
  local dir=$work/$1-$3
  "$2" launch --nproc-per-node "$nproc" --master-port "$(port)" -- train "$recipe" --set run.dir="$dir" \
    --set checkpoint.every=0 --set train.eval_every=0 "${sets[@]}" > "$dir.log" 2>&1 ||
    { tail -n 30 "$dir.log" >&2; exit 1; }
}
for ((round = 0; round < rounds; ++round)); do
  if ((round % 2 == 0)); then run baseline "$baseline" $round; run candidate "$candidate" $round
  else run candidate "$candidate" $round; run baseline "$baseline" $round; fi
done

"$python" - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def steps(name, r):
    return [json.loads(l) for l in open(f"{work}/{name}-{r}/metrics.jsonl") if '"loss"' in l and "eval_loss" not in l]
runs = {name: [steps(name, r) for r in range(rounds)] for name in ("baseline", "candidate")}
median = {name: statistics.median(s["step_s"] for run in runs[name] for s in run[2:]) for name in runs}
losses = {name: [s["loss"] for s in runs[name][0]] for name in runs}
same = all(run_losses == losses[name] for name in runs for run_losses in ([s["loss"] for s in r] for r in runs[name]))
identical = losses["baseline"] == losses["candidate"]
print(f"steps a run: {len(losses['baseline'])}, rounds: {rounds}")
print(f"baseline   median step {median['baseline']:.4f} s")
print(f"candidate  median step {median['candidate']:.4f} s  ({median['baseline'] / median['candidate']:.2f}x the baseline's speed)")
print("per-step losses: " + ("bit-identical" if identical and same else "DIFFER"))
sys.exit(0 if identical and same else 1)
PY

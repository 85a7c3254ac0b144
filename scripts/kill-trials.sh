#!/usr/bin/env bash
# Randomised crash trials: in each, `xtrain launch --max-restarts 2` trains 2 ranks while one
# rank, chosen at random, is killed with SIGKILL: at a random moment from outside, at the start
# of a random step, or in the middle of a random checkpoint write; saves alternate between
# synchronous and background (checkpoint.async). Every trial must restart, resume and end with
# weights and optimizer state bit-identical to an uninterrupted run.
# Usage: scripts/kill-trials.sh [--trials N] [--seed S] [--xtrain PATH]   (defaults 20, 1, build/xtrain)
set -euo pipefail
srcdir=$(cd "$(dirname "$0")/.." && pwd)
trials=20 seed=1 xtrain=$srcdir/build/xtrain
while (($#)); do
  case $1 in
    --trials) trials=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --xtrain) xtrain=$2; shift 2 ;;
    *) echo "usage: $0 [--trials N] [--seed S] [--xtrain PATH]" >&2; exit 2 ;;
  esac
done
source "$srcdir/tests/integration/lib/distributed.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work
steps=30 every=3
write_recipe "$work/recipe.yaml" $steps
run() {  # NAME [launch options...] -- [train options...]
  local name=$1
  shift
  local launch_options=()
  while [[ $1 != -- ]]; do launch_options+=("$1"); shift; done
  shift
  "$xtrain" launch --nproc-per-node 2 --master-port "$(free_port)" "${launch_options[@]}" -- \
    train "$work/recipe.yaml" --set run.dir="$work/$name" --set checkpoint.every=$every --set checkpoint.keep=3 "$@"
}
rank_pid() {  # NAME RANK: the process of that rank of the trial's job
  local pid
  for pid in $(pgrep -f "run.dir=$work/$1( |$)"); do
    tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "RANK=$2" && { echo "$pid"; return; }
  done
  return 0
}

run reference -- > "$work/reference.log" 2>&1
final=$work/reference/checkpoints/step-$steps
RANDOM=$seed
passed=0
for trial in $(seq 1 "$trials"); do
  mode=$([[ $((trial % 2)) == 0 ]] && echo async || echo sync)
  rank=$((RANDOM % 2))
  kind=$(((trial - 1) % 3))
  name=trial-$trial
  async=$([[ $mode == async ]] && echo true || echo false)
  case $kind in
    0)  # from outside, at a random moment: a random fraction of a step after a random step's log line
      step=$((1 + RANDOM % (steps - 2)))
      delay=0.0$((RANDOM % 10))
      run "$name" --max-restarts 2 -- --set checkpoint.async=$async --set train.log_every=1 > "$work/$name.log" 2>&1 &
      launcher=$!
      for _ in $(seq 1 600); do grep -q "step  *$step/$steps " "$work/$name.log" && break; sleep 0.02; done
      sleep "$delay"
      pid=$(rank_pid "$name" $rank)
      if [[ -n $pid ]]; then kill -KILL "$pid"; fi
      wait $launcher || { cat "$work/$name.log"; echo "trial $trial: the job failed" >&2; exit 1; }
      what="kill -9 of rank $rank ${delay} s after step $step"
      ;;
    1)  # at the start of a random step
      step=$((2 + RANDOM % (steps - 2)))
      XTRAIN_FAULT=kill:$rank:$step run "$name" --max-restarts 2 -- --set checkpoint.async=$async > "$work/$name.log" 2>&1
      what="kill -9 of rank $rank at the start of step $step"
      ;;
    2)  # in the middle of a random checkpoint write
      step=$((every * (1 + RANDOM % (steps / every - 1))))
      XTRAIN_FAULT=kill_in_save:$rank:$step run "$name" --max-restarts 2 -- --set checkpoint.async=$async \
        > "$work/$name.log" 2>&1
      what="kill -9 of rank $rank during the write of checkpoint step-$step"
      ;;
  esac
  grep -q "restarting every rank" "$work/$name.log" || { echo "trial $trial ($what): the kill came too late to count; rerun"; continue; }
  for shard in shard-00000 shard-00001; do
    cmp -s "$final/$shard.safetensors" "$work/$name/checkpoints/step-$steps/$shard.safetensors" || {
      cat "$work/$name.log"
      echo "trial $trial ($what, $mode saves): $shard differs from the uninterrupted run" >&2
      exit 1
    }
  done
  resumed=$(grep -o "resumed from [^ ]*step-[0-9]* at step [0-9]*" "$work/$name.log" | sed 's/.* at step //' | tail -1 || true)
  echo "trial $trial: $what, $mode saves: restarted, resumed at step ${resumed:-0}, final state bit-identical"
  passed=$((passed + 1))
  rm -rf "${work:?}/$name"
done
echo "kill trials: $passed of $trials bit-identical to an uninterrupted run"
((passed == trials))

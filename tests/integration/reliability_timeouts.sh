#!/usr/bin/env bash
# A rank that never starts, and a step that stalls outside any collective under the watchdog, end
# the job in time (dist.init_timeout_s, dist.watchdog_s, with a few seconds' grace), naming the
# ranks. Held to time limits, it runs alone (tests/CMakeLists.txt); reliability.sh has the rest.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
source "$srcdir/tests/integration/lib/expect.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work
unset OMP_WAIT_POLICY
write_recipe "$work/recipe.yaml" 12
small=("$work/recipe.yaml" --set train.log_every=1)

# A rank that never starts; a step that stalls outside any collective.
started=$(date +%s)
expect_exit 1 "$work/missing.log" env WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
  MASTER_PORT="$(free_port)" "$xtrain" train "${small[@]}" --set run.dir="$work/missing" --set dist.init_timeout_s=3
missing_elapsed=$(($(date +%s) - started))
grep -q "^error: rank 1 of 2 never joined at 127.0.0.1:[0-9]* within dist.init_timeout_s=3; start every rank with the same WORLD_SIZE, MASTER_ADDR and MASTER_PORT" "$work/missing.log" ||
  { cat "$work/missing.log"; fail "missing rank message"; }
((missing_elapsed <= 3 + 5)) || fail "the missing rank took ${missing_elapsed} s to report"
started=$(date +%s)
expect_exit 1 "$work/stall.log" env XTRAIN_FAULT=stall:1:4 "$xtrain" launch --nproc-per-node 2 --master-port "$(free_port)" -- \
  train "${small[@]}" --set run.dir="$work/stall" --set dist.watchdog_s=3
elapsed=$(($(date +%s) - started))
grep -q "error: watchdog: rank [01] completed no step for 3 s (dist.watchdog_s=3), after step 3; its last collective: .*Every rank: rank 0: after step 3, last collective .*; rank 1: after step 3, last collective " "$work/stall.log" ||
  { cat "$work/stall.log"; fail "watchdog message"; }
((elapsed <= 3 + 5 + 2)) || fail "the stalled job took ${elapsed} s to end"
echo "5. missing rank named after ${missing_elapsed} s (init_timeout_s 3); stalled step ended after ${elapsed} s (watchdog_s 3) with every rank's last step"

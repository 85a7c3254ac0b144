#!/usr/bin/env bash
# `xtrain health` and dist.health_check. On 2 ranks and on 4 (tp 2 x fsdp 2) every rank agrees
# and the table names each mesh group's collectives and their latency; a rank slowed on purpose
# (XTRAIN_HEALTH_FAULT=slow:R) or whose matmul chain is perturbed (corrupt:R) is named by rank
# and host, and the check stops (exit 3) or warns (exit 0) as set. In training, dist.health_check
# start stops a run before its first step when a rank's result differs, and a rank slowed every
# step is named in metrics.jsonl (persistent_slow_rank) and warned of. Bad settings exit 2.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
source "$srcdir/tests/integration/lib/expect.sh"
work=$(mktemp -d)
trap '[[ -n "${KEEP_WORK:-}" ]] || rm -rf "$work"' EXIT
export TMPDIR=$work
write_recipe "$work/recipe.yaml" 30
host=$(hostname)
# 2 to 4 ranks share this machine's cores: the slow check allows a wide margin (0.6) here.
health() {
  local nproc=$1
  shift
  "$xtrain" launch --nproc-per-node "$nproc" --master-port "$(free_port)" -- health "$work/recipe.yaml" \
    --slow-fraction 0.6 --matmul-size 128 --message-bytes 262144 "$@"
}

health 2 > "$work/two.log" 2>&1
grep -q "every rank agrees and none is slower than the median by 60%" "$work/two.log"
for collective in all_reduce all_gather all_to_all send_recv; do grep -q " world      2  $collective " "$work/two.log"; done
health 4 --set parallel.tp=2 > "$work/four.log" 2>&1
for group in world fsdp tp; do grep -q "  $group      [24]  all_reduce " "$work/four.log"; done
# The latency rows: each group's small all-reduce alone and between segments of compute.
[[ $(grep -A3 "latency       alone ms  beside compute ms" "$work/four.log" |
  grep -cE "  (world|fsdp|tp) +[24]  all_reduce +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3}$") == 3 ]] || {
  cat "$work/four.log"
  exit 1
}
grep "\[rank 0\]" "$work/four.log" | sed 's/^\[rank 0\]: //' | grep -v "^launch"

XTRAIN_HEALTH_FAULT=slow:2 expect_exit 1 "$work/slow.log" health 4 --set parallel.tp=2
expect_match "$work/slow.log" "health: rank 2 ($host): matmul [0-9.]* GFLOP/s, 0.[0-9]* x the median"
expect_text "$work/slow.log" "health: stopping: 1 problem(s) above"
grep "health: rank 2" "$work/slow.log" | sed 's/^\[rank 0\]: //'
XTRAIN_HEALTH_FAULT=corrupt:3 expect_refusal 1 "$work/corrupt.log" "health: rank 3 ($host): its seeded matmul chain's result differs" \
  health 4 --set parallel.tp=2
grep -q "     3  .*DIFFERS" "$work/corrupt.log"
grep "health: rank 3" "$work/corrupt.log" | sed 's/^\[rank 0\]: //'
XTRAIN_HEALTH_FAULT=corrupt:1 health 2 --on-problem warn > "$work/warn.log" 2>&1
grep -q "health: rank 1 ($host): its seeded matmul chain's result differs" "$work/warn.log"

# Training: a differing rank stops the run before its first step.
XTRAIN_HEALTH_FAULT=corrupt:1 expect_exit 1 "$work/corrupt_run.out" train corrupt_run 2 --set dist.health_check=start
expect_match "$work/corrupt_run.log" \
  "health check at step 0: rank 1 ($host): its seeded matmul chain's result differs.*stopping (dist.health_action: stop"
if grep -q "step  1/30" "$work/corrupt_run.log"; then echo "the run trained after its health check failed"; exit 1; fi
echo "training with dist.health_check start, rank 1 corrupted: stopped before step 1 (exit 1)"

# A rank slowed every step is named after most of 20 steps, and checked again every 10 steps.
XTRAIN_HEALTH_FAULT=slow:1 train slow_run 2 --set dist.health_check=every_10 --set dist.health_action=warn \
  --set dist.health_slow_fraction=0.1
grep -q "warning: rank 1 was the slowest in [0-9]* of the last 20 steps" "$work/slow_run.log"
"${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}" - "$work/slow_run/metrics.jsonl" <<'PY'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
named = [r["persistent_slow_rank"] for r in records if "persistent_slow_rank" in r]
checks = [r for r in records if "health.slow_ranks" in r]
assert named and set(named) == {1}, named
assert [r["step"] for r in checks] == [0, 10, 20] and all(r["health.slow_ranks"] == [1] for r in checks), checks
print(f"training, rank 1 slowed: persistent_slow_rank 1 in {len(named)} of 30 steps' records; health checks at "
      f"steps {[r['step'] for r in checks]} named slow ranks {[r['health.slow_ranks'] for r in checks]}")
PY

# Bad settings: exit 2, naming the key or the variable.
expect_refusal 2 "$work/bad.log" "dist.health_check: expected off, start or every_N (N steps, N >= 1), got 'sometimes'" \
  "$xtrain" validate "$work/recipe.yaml" --set dist.health_check=sometimes
XTRAIN_HEALTH_FAULT=fast:1 expect_refusal 2 "$work/bad.log" "XTRAIN_HEALTH_FAULT=fast:1: unknown fault 'fast' (expected slow:<rank> or corrupt:<rank>)" \
  "$xtrain" health "$work/recipe.yaml"

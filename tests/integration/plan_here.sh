#!/usr/bin/env bash
# `xtrain plan` against runs on this machine (scripts/plan-here.sh --quick): four configurations
# (dense FSDP 2 with and without full recompute, dense HSDP 2 x 2 on 4 ranks, MoE EP 2 with
# Domino, recompute and the unchunked loss) trained for 6 steps, each planned with the profile
# measured around it in the same invocation; fails when one misses its measured peak memory
# (less the process baseline) by more than 10% or its median step time by more than 20%. These
# are four of the six configurations that hold both bounds; scripts/plan-here.sh without --quick
# runs all 12, and docs/plan.md says which miss and why.
set -euo pipefail
xtrain=$1
srcdir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash "$srcdir/scripts/plan-here.sh" --quick --steps 6 --xtrain "$xtrain" --out "$work" | tee "$work/table.txt"
grep -q "4 of 4 within 10% memory and 20% time" "$work/table.txt"
echo "plan_here: ok"

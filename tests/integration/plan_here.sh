#!/usr/bin/env bash
# `xtrain plan` against runs on this machine (scripts/plan-here.sh --quick): four configurations
# (dense FSDP 2 with and without full recompute, dense HSDP 2 x 2 on 4 ranks, MoE EP 2 with
# Domino, recompute and the unchunked loss) trained for 6 steps; fails when the plan misses the
# measured peak memory (less the process baseline) by more than 10%. Step times are printed, not
# held: on a shared machine a timed test fails for reasons of its own; scripts/plan-here.sh holds
# them within 20% against rates measured around each run, and docs/plan.md gives its table.
set -euo pipefail
xtrain=$1
srcdir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash "$srcdir/scripts/plan-here.sh" --quick --gate memory --steps 6 --xtrain "$xtrain" --out "$work" | tee "$work/table.txt"
grep -q "4 of 4 within 10% memory" "$work/table.txt"
echo "plan_here: ok"

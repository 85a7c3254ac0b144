#!/usr/bin/env bash
# Three of scripts/kill-trials.sh's randomised crash trials (a kill from outside at a random
# moment, at the start of a step, during a checkpoint write; synchronous and background saves):
# each restarts under `xtrain launch --max-restarts` and ends bit-identical to an uninterrupted run.
set -euo pipefail
xtrain=$1
srcdir=$2
"$srcdir/scripts/kill-trials.sh" --trials 3 --seed 3 --xtrain "$xtrain"

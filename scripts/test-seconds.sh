#!/usr/bin/env bash
# Writes tests/test_seconds.txt from the times of the last scripts/test.sh run (its ctest log,
# build/ctest.log, or the file given): ctest's COST, so that a fresh clone, which has no ctest
# history, starts its longest tests first.
#   scripts/test-seconds.sh [CTEST_LOG]
set -euo pipefail
cd "$(dirname "$0")/.."
log=${1:-build/ctest.log}
[[ -f $log ]] || { echo "$log: no ctest log to read; run scripts/test.sh first" >&2; exit 2; }
times=$(sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) \.+ *(Passed|\*\*\*Failed.*|Failed.*) +([0-9.]+) sec$/\1 \3/p' "$log" |
        grep -v '^gpu\.' | awk '{ printf "%s %.0f\n", $1, $2 }' | sort)
[[ -n $times ]] || { echo "$log: no test times in it (a ctest log of scripts/test.sh?)" >&2; exit 2; }
{
  echo "# Seconds per test on a $(nproc)-core $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
       "as scripts/test.sh ran them side by side ($(date -u +%F)); scripts/test-seconds.sh writes this file."
  echo "$times"
} > tests/test_seconds.txt
echo "tests/test_seconds.txt: $(grep -c '^[a-z]' tests/test_seconds.txt) tests"

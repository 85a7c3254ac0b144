#!/usr/bin/env bash
# Installs what is missing, builds everything and runs the whole test suite (unit tests, end-to-end
# runs, and the GPU tests, which report themselves skipped without a device), then a short run of
# every fuzz target. Prints the time of each phase.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
bash scripts/setup-deps.sh
installed=$(date +%s)
bash scripts/build.sh
built=$(date +%s)
# The unit tests run side by side (most of their time is starting the binary); the end-to-end
# tests pin their own threads and ranks, and one at a time keeps their timings predictable.
ctest --test-dir build --output-on-failure -L unit -j "$(nproc)" "$@"
ctest --test-dir build --output-on-failure -LE unit "$@"
tested=$(date +%s)
# The parsers of outside input under libFuzzer, ASan and UBSan: 30 s a target, one per core.
bash scripts/fuzz.sh --seconds 30
done_at=$(date +%s)
echo "scripts/test.sh: install $((installed - start)) s, build $((built - installed)) s, tests $((tested - built)) s," \
  "fuzz $((done_at - tested)) s, total $((done_at - start)) s"

#!/usr/bin/env bash
# Installs what is missing, builds everything and runs the whole test suite (unit tests, end-to-end
# runs, and the GPU tests, which report themselves skipped without a device). Prints the time of
# each phase.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
bash scripts/setup-deps.sh
installed=$(date +%s)
bash scripts/build.sh
built=$(date +%s)
# Tests pin their own threads; one test at a time keeps timings and memory predictable.
ctest --test-dir build --output-on-failure "$@"
done_at=$(date +%s)
echo "scripts/test.sh: install $((installed - start)) s, build $((built - installed)) s, tests $((done_at - built)) s," \
  "total $((done_at - start)) s"

#!/usr/bin/env bash
# Builds everything and runs the whole test suite (unit tests and end-to-end runs).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
bash scripts/build.sh
# Tests pin their own threads; one test at a time keeps timings and memory predictable.
ctest --test-dir build --output-on-failure "$@"
echo "scripts/test.sh: $(( $(date +%s) - start )) s"

#!/usr/bin/env bash
# Configures and builds xtrain into build/ (the executable is build/xtrain): everything, or the
# targets named (scripts/test.sh: xtrain_test_binaries, what ctest runs, first).
#   scripts/build.sh [TARGET ...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
build_type=${BUILD_TYPE:-Release}
# The target graph scripts/check-layering.py reads (lib/CMakeLists.txt), from the first configure on.
mkdir -p build/.cmake/api/v1/query && touch build/.cmake/api/v1/query/codemodel-v2
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$build_type" \
  ${XTRAIN_UNITY_BATCH_SIZE:+-DXTRAIN_UNITY_BATCH_SIZE="$XTRAIN_UNITY_BATCH_SIZE"} >/dev/null
cmake --build build -j "$(nproc)" ${1:+--target "$@"}

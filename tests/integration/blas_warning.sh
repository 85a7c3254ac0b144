#!/usr/bin/env bash
# xtrain warns at start-up when LibTorch's sgemm resolves to the slow reference BLAS, and
# not when it resolves to OpenBLAS.
set -euo pipefail
xtrain=$1
"$xtrain" env 2>"$(mktemp)" | grep -q '(optimized)'
[[ -z $("$xtrain" env 2>&1 >/dev/null) ]]
reference_dir=/usr/lib/x86_64-linux-gnu/blas
if [[ ! -e $reference_dir/libblas.so.3 ]]; then
  echo "reference BLAS (package libblas3) not installed: nothing to provoke the warning with"
  exit 77
fi
warning=$(LD_LIBRARY_PATH=$reference_dir "$xtrain" env 2>&1 >/dev/null)
grep -q "^warning: LibTorch is using the reference BLAS ($reference_dir/libblas.so.3" <<<"$warning"
grep -q "apt-get install libopenblas0-pthread" <<<"$warning"
echo "blas warning: shown on the reference BLAS, silent on OpenBLAS"

#!/usr/bin/env bash
# What a hostile user does to a run: damaged checkpoints, symlinks around an export target, signals,
# odd STOP files, batches that cannot fit, changed settings on resume. One case per file in
# tests/integration/hostile/ (case_*.sh), each run in a scratch folder of its own beside a folder of
# neighbouring files whose hashes must not change (lib.sh's guard_neighbours / check_neighbours).
# Prints each case's verdict and time, then the count and the total time.
#   hostile.sh XTRAIN SRCDIR [CASE ...]    CASE: a name (sighup) for case_sighup.sh; all by default
# ctest runs each case as a test of its own (integration.hostile.NAME, tests/CMakeLists.txt).
set -euo pipefail
xtrain=$1
srcdir=$2
shift 2
if [[ $# == 0 ]]; then
  cases=("$srcdir"/tests/integration/hostile/case_*.sh)
  [[ -e ${cases[0]} ]] || { echo "hostile: no cases in $srcdir/tests/integration/hostile" >&2; exit 1; }
else
  cases=()
  for name in "$@"; do
    cases+=("$srcdir/tests/integration/hostile/case_$name.sh")
    [[ -f ${cases[-1]} ]] || { echo "hostile: no case $name (${cases[-1]})" >&2; exit 1; }
  done
fi
start=$(date +%s)
failed=()
for case in "${cases[@]}"; do
  name=$(basename "$case" .sh)
  work=$(mktemp -d)
  case_start=$(date +%s)
  if (cd "$work" && TMPDIR=$work bash "$case" "$xtrain" "$srcdir" "$work") > "$work.log" 2>&1; then
    printf 'hostile %-40s ok    %3d s\n' "${name#case_}" $(($(date +%s) - case_start))
  else
    cat "$work.log"
    printf 'hostile %-40s FAIL  %3d s\n' "${name#case_}" $(($(date +%s) - case_start))
    failed+=("$name")
  fi
  rm -rf "$work" "$work.log"
done
echo "hostile: ${#cases[@]} cases, $((${#cases[@]} - ${#failed[@]})) passed, $(($(date +%s) - start)) s"
[[ ${#failed[@]} -eq 0 ]] || { echo "hostile: failed: ${failed[*]}" >&2; exit 1; }

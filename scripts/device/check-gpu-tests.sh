#!/usr/bin/env bash
# The verdict on a ctest log of the GPU tests (scripts/device/run.sh's gpu-tests.log):
#
#   scripts/device/check-gpu-tests.sh LOG CTEST_STATUS [--skips-expected]
#
# Exits 0 when every test listed passed, 1 otherwise, naming each test that failed (a failure,
# a timeout, a crash, not run) or reported itself skipped: a GPU test exits 77 when it finds no
# device, which ctest counts as skipped, not failed, so a session without a device would look
# green. With --skips-expected (run.sh --dry-run: no device here) skipped tests are expected and
# said to be. No test at all, or a ctest that failed without naming a test, fails too.
set -euo pipefail
log=$1
ctest_status=$2
skips_expected=0
[[ ${3:-} == --skips-expected ]] && skips_expected=1

passed=() skipped=() failed=()
while read -r line; do
  name=$(sed -E 's/^.*Test +#[0-9]+: ([^ ]+) .*$/\1/' <<< "$line")
  case $line in
    *" Passed "*) passed+=("$name") ;;
    *"***Skipped"*) skipped+=("$name") ;;
    *) failed+=("$name ($(sed -E 's/^.*\*\*\*([^0-9]*[A-Za-z]).*$/\1/' <<< "$line"))") ;;
  esac
done < <(grep -E "Test +#[0-9]+: " "$log" || true)

total=$((${#passed[@]} + ${#skipped[@]} + ${#failed[@]}))
bad=0
if ((total == 0)); then
  echo "GPU tests: none ran (ctest exit $ctest_status); see $log"
  exit 1
fi
if ((${#failed[@]})); then
  echo "GPU tests FAILED: ${failed[*]}"
  bad=1
fi
if ((${#skipped[@]})); then
  if ((skips_expected)); then
    echo "GPU tests skipped, as expected without a device (--dry-run): ${skipped[*]}"
  else
    echo "GPU tests SKIPPED (no device found, or a test skipped itself), which counts as a failure here: ${skipped[*]}"
    bad=1
  fi
fi
if ((ctest_status != 0 && ${#failed[@]} == 0)); then
  echo "GPU tests: ctest exited $ctest_status without a failed test; see $log"
  bad=1
fi
((bad)) || echo "GPU tests: ${#passed[@]} passed, ${#skipped[@]} skipped, of $total"
exit "$bad"

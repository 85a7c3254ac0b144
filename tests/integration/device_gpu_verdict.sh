#!/usr/bin/env bash
# scripts/device/run.sh's verdict on the GPU tests (scripts/device/check-gpu-tests.sh), on the
# logs of a real ctest over a scratch project of fake gpu.* tests: all passed is green; a failed
# test, a timeout, or a test that reports itself skipped (exit 77, no device) is red and named;
# --dry-run's skips are expected and said to be, while a failure there is still red; no test at
# all is red.
set -euo pipefail
srcdir=$2
source "$srcdir/tests/integration/lib/expect.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
check=(bash "$srcdir/scripts/device/check-gpu-tests.sh")

# ctest_log NAME TEST=EXIT...: a project whose tests exit as given (77 is skipped, as for the
# GPU tests; "sleep" outlives the timeout), run by ctest into $work/NAME.log; prints ctest's exit.
ctest_log() {
  local name=$1 project=$work/$1
  shift
  mkdir -p "$project"
  {
    echo "cmake_minimum_required(VERSION 3.16)"
    echo "project(fake_gpu_tests NONE)"
    echo "enable_testing()"
    for spec in "$@"; do
      local test=${spec%=*} code=${spec#*=}
      if [[ $code == sleep ]]; then
        echo "add_test(NAME $test COMMAND sleep 5)"
      else
        echo "add_test(NAME $test COMMAND sh -c \"exit $code\")"
      fi
      echo "set_tests_properties($test PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1)"
    done
  } > "$project/CMakeLists.txt"
  cmake -S "$project" -B "$project/build" > /dev/null
  local status=0
  ctest --test-dir "$project/build" -R '^gpu\.' --output-on-failure --timeout 1 > "$work/$name.log" 2>&1 || status=$?
  echo "$status"
}

status=$(ctest_log green gpu.nccl=0 gpu.fsdp=0)
expect_exit 0 "$work/green.out" "${check[@]}" "$work/green.log" "$status"
expect_line "$work/green.out" "GPU tests: 2 passed, 0 skipped, of 2"

status=$(ctest_log failed gpu.nccl=0 gpu.fsdp=1 gpu.offload=sleep)
expect_refusal 1 "$work/failed.out" "GPU tests FAILED: gpu.fsdp (Failed) gpu.offload (Timeout)" \
  "${check[@]}" "$work/failed.log" "$status"

status=$(ctest_log skipped gpu.nccl=0 gpu.fsdp=77)
[[ $status == 0 ]] || fail "ctest counts a skipped test as failed here (exit $status); the check below tests nothing"
expect_refusal 1 "$work/skipped.out" "GPU tests SKIPPED (no device found, or a test skipped itself), which counts as a failure here: gpu.fsdp" \
  "${check[@]}" "$work/skipped.log" "$status"

status=$(ctest_log dry gpu.nccl=77 gpu.fsdp=77)
expect_exit 0 "$work/dry.out" "${check[@]}" "$work/dry.log" "$status" --skips-expected
expect_line "$work/dry.out" "GPU tests skipped, as expected without a device (--dry-run): gpu.nccl gpu.fsdp"

status=$(ctest_log dry_failed gpu.nccl=77 gpu.fsdp=1)
expect_refusal 1 "$work/dry_failed.out" "GPU tests FAILED: gpu.fsdp (Failed)" \
  "${check[@]}" "$work/dry_failed.log" "$status" --skips-expected

status=$(ctest_log none cpu.only=0)
expect_refusal 1 "$work/none.out" "GPU tests: none ran" "${check[@]}" "$work/none.log" "$status"
for name in green failed skipped dry dry_failed none; do echo "$name: $(head -1 "$work/$name.out")"; done

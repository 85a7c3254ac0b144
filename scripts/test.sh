#!/usr/bin/env bash
# Installs what is missing, builds everything and runs the whole test suite (unit tests, end-to-end
# runs, and the GPU tests, which report themselves skipped without a device), then a short run of
# every fuzz target. Prints the time of each phase.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
bash scripts/setup-deps.sh
installed=$(date +%s)
# The tests' Python references fork from one interpreter that imported torch and transformers
# once (tests/python/server.py): some hundred imports of 4 to 8 CPU seconds each. It starts beside
# the build; without it (it did not start) each call runs its own interpreter, with the same results.
python_server=$(mktemp -d /tmp/xtrain-python.XXXXXX)
mkdir -p build
.venv/bin/python3 tests/python/server.py "$python_server/socket" > build/python-server.log 2>&1 &
python_server_pid=$!
fuzz_build=
# What this script started in the background ends with it.
stop_background() {
  [[ -z $fuzz_build ]] || kill -- -"$fuzz_build" 2>/dev/null || true
  kill "$python_server_pid" 2>/dev/null || true
  rm -rf "$python_server"
}
trap stop_background EXIT
bash scripts/build.sh xtrain_test_binaries
built=$(date +%s)
# The tests share the cores by what they declare (PROCESSORS in tests/CMakeLists.txt), in one
# ctest run, so that no phase waits on another's last test: of the 2 x nproc slots, a test that
# keeps a core busy (a unit test file, a one-process run on two threads) takes 2, as does one that
# starts ranks (it keeps two cores only about 60% busy: process starts, Gloo hand-offs, exports),
# so two of them run together; a one-thread run takes 1; a test that holds something to a time
# limit, or uses the GPU, runs alone. The longest start first (COST, tests/test_seconds.txt).
# The rest of the build (the benchmark tools, the CPU-only variant check: 210 CPU s) and the fuzz
# targets' sanitizer build (clang, its own folder) take only the cycles the tests leave idle (15%
# of two cores, measured): at the lowest priority, beside them. In a session of their own (so
# that one kill stops them) they are also a scheduling group of their own, which the kernel
# shares the cores with as an equal (sched_autogroup): that group's nice must be lowered too, or
# the builds take half the cores.
setsid -w bash -c 'echo 19 > /proc/self/autogroup 2>/dev/null || true
                   exec nice -n 19 bash -c "cmake --build build -j $(nproc) && bash scripts/fuzz.sh --build-only"' \
  > build/fuzz-build.log 2>&1 &
fuzz_build=$!
for _ in $(seq 600); do [[ -S $python_server/socket ]] && break; sleep 0.1; done
if [[ -S $python_server/socket ]]; then
  export XTRAIN_PYTHON_SERVER=$python_server/socket
else
  echo "scripts/test.sh: the Python server did not start (build/python-server.log); each test starts its own" >&2
fi
ctest --test-dir build --output-on-failure -O build/ctest.log -j "$((2 * $(nproc)))" "$@"
tested=$(date +%s)
wait "$fuzz_build" || { cat build/fuzz-build.log >&2; exit 1; }
# The parsers of outside input under libFuzzer, ASan and UBSan: 20 s a target, one per core. Every
# fixed finding is replayed and every seed input runs before the clock matters (libFuzzer runs the
# whole seed corpus first), so the seconds only buy new mutations: 9 targets on 2 cores is 5
# rounds, 100 s at 20 s against 150 s at 30. A campaign is `scripts/fuzz.sh --seconds 3600`.
bash scripts/fuzz.sh --seconds 20
done_at=$(date +%s)
echo "scripts/test.sh: install $((installed - start)) s, build $((built - installed)) s, tests $((tested - built)) s," \
  "fuzz $((done_at - tested)) s, total $((done_at - start)) s"

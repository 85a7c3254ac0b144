#!/usr/bin/env bash
# Fuzzes every parser of outside input (tests/fuzz/*.cpp: recipes, safetensors, .idx, the three
# tokenizer files, chat JSONL, checkpoint manifests) with libFuzzer under ASan and UBSan.
#
#   scripts/fuzz.sh [--seconds N] [--jobs J] [--build-only] [TARGET ...]
#
# Builds the "asan" preset into build-asan/, writes the seed corpora (tests/fuzz/make_seeds.py),
# replays the inputs of every finding already fixed (tests/fuzz/regressions/TARGET/), then runs
# each target for N seconds (default 30, the CI smoke; 3600 is an hour's campaign), J at a time
# (default: one per core). The corpus each run grows is kept in build-asan/corpus/TARGET and
# seeds the next run. Prints one line per target (runs, corpus size, findings) and exits 1 when
# anything was found; each finding's input is in build-asan/findings/TARGET/, and
# `build-asan/fuzz_TARGET FILE` reproduces it. --build-only stops after the build (scripts/test.sh
# builds it beside the end-to-end tests, which leave part of the cores idle).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=30
jobs=$(nproc)
build_only=0
targets=()
while (($#)); do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "scripts/fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
available=($(cd tests/fuzz && ls *.cpp | sed 's/\.cpp$//'))
((${#targets[@]})) || targets=("${available[@]}")
for target in "${targets[@]}"; do
  [[ -f tests/fuzz/$target.cpp ]] || { echo "scripts/fuzz.sh: no target '$target' (targets: ${available[*]})" >&2; exit 2; }
done

bash scripts/setup-deps.sh
mkdir -p build-asan
cmake --preset asan > build-asan/configure.log 2>&1 || { cat build-asan/configure.log >&2; exit 1; }
cmake --build --preset asan -j "$(nproc)" | grep -v '^\[' || true
[[ -x build-asan/fuzz_${targets[0]} ]] || { echo "scripts/fuzz.sh: the asan build failed" >&2; exit 1; }
((build_only)) && exit 0
work=$PWD/build-asan
rm -rf "$work/seeds"
.venv/bin/python3 tests/fuzz/make_seeds.py "$work/seeds" "$PWD"
# The parsers read files: a RAM-backed scratch folder keeps that cheap.
[[ -w /dev/shm ]] && export TMPDIR=/dev/shm

failed=0
for target in "${targets[@]}"; do
  regressions=tests/fuzz/regressions/$target
  if [[ -d $regressions ]] && ! "$work/fuzz_$target" -runs=0 "$regressions" > "$work/regressions-$target.log" 2>&1; then
    echo "fuzz_$target: a fixed finding is back (tests/fuzz/regressions/$target); see $work/regressions-$target.log" >&2
    failed=1
  fi
done

run_target() {  # target seconds work
  local target=$1 seconds=$2 work=$3
  mkdir -p "$work/corpus/$target" "$work/findings/$target"
  local started=$SECONDS
  "$work/fuzz_$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
    -print_final_stats=1 -artifact_prefix="$work/findings/$target/" \
    "$work/corpus/$target" "$work/seeds/$target" > "$work/fuzz-$target.log" 2>&1 || true
  echo $((SECONDS - started)) > "$work/fuzz-$target.seconds"  # less than asked when it found something
}
export -f run_target
started=$(date +%s)
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_target "$@"' _ {} "$seconds" "$work"

printf '%-16s %8s %12s %8s %9s\n' target seconds runs corpus findings
for target in "${targets[@]}"; do
  log=$work/fuzz-$target.log
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  findings=$(find "$work/findings/$target" -type f | wc -l)
  printf '%-16s %8s %12s %8s %9s\n' "$target" "$(cat "$work/fuzz-$target.seconds")" "${runs:-?}" \
    "$(find "$work/corpus/$target" -type f | wc -l)" "$findings"
  if [[ -z $runs || $findings -gt 0 ]]; then
    failed=1
    grep -m3 -E 'ERROR|invariant broken|terminate called|runtime error|deadly signal' "$log" | sed "s/^/  fuzz_$target: /" >&2 || true
    echo "  fuzz_$target: log $log; inputs in $work/findings/$target/" >&2
  fi
done
echo "scripts/fuzz.sh: ${#targets[@]} targets, $seconds s each, in $(( $(date +%s) - started )) s"
exit "$failed"

#!/usr/bin/env bash
# The whole GPU session as one call: unpacks the Debian packages carried in .deps/debs
# (scripts/device/fetch-deps.sh), builds xtrain against the machine's own torch 2.11 wheel with
# every core, runs the GPU tests (ctest -R '^gpu\.') and the training benchmark (xtrain, PyTorch
# eager and torch.compile on the same model, batch and dtype, with the bf16 matmul ceiling
# measured in the same call), and prints a short table last. Logs go under $OUT (or runs/device).
# Exits 1 after the table when a GPU test failed or reported itself skipped (exit 77: no device),
# naming them (scripts/device/check-gpu-tests.sh).
#
#   scripts/device/run.sh            on the GPU machine (python3 there carries torch 2.11+cu130)
#   scripts/device/run.sh --dry-run  the same flow here on the CPU: packages unpacked into a
#                                    scratch folder, the project's .venv as "the machine's" torch,
#                                    a small model; the GPU tests report themselves skipped, as
#                                    expected there (a failed one still fails the dry run)
set -euo pipefail
cd "$(dirname "$0")/../.."
dry_run=0
[[ ${1:-} == --dry-run ]] && dry_run=1
out=${OUT:-$PWD/runs/device}
mkdir -p "$out"
started=$(date +%s)
log() { echo "[$(($(date +%s) - started)) s] $*"; }

if ((dry_run)); then
  python=${XTRAIN_PYTHON:-$PWD/.venv/bin/python3}
  deps=$PWD/build-device-dry/deps
  build=build-device-dry
  device=cpu dtype=fp32 recipe=recipes/bench-cpu.yaml steps=3 warmup=1
else
  python=$(command -v python3)
  deps=/opt/deps
  build=build-device
  device=cuda dtype=bf16 recipe=recipes/bench-gpu.yaml steps=10 warmup=3
fi
jobs=$(nproc)

# 1. The packages the machine lacks, unpacked (never into /), their pkg-config files re-rooted.
compgen -G ".deps/debs/*.deb" > /dev/null || { echo "no .deps/debs: run scripts/device/fetch-deps.sh first" >&2; exit 2; }
mkdir -p "$deps"
for deb in .deps/debs/*.deb; do dpkg -x "$deb" "$deps"; done
find "$deps/usr" -name '*.pc' -exec sed -i "s|^prefix=/usr\$|prefix=$deps/usr|" {} +
multiarch=$deps/usr/lib/x86_64-linux-gnu
export PKG_CONFIG_PATH=$multiarch/pkgconfig:$deps/usr/share/pkgconfig
export LD_LIBRARY_PATH=$multiarch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
log "packages unpacked into $deps"

# 2. Build against the machine's torch.
torch_dir=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
export XTRAIN_VENV=$(dirname "$(dirname "$python")") XTRAIN_PYTHON=$python
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLIBTORCH="$torch_dir" \
  -DCMAKE_PREFIX_PATH="$deps/usr" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build "$build" -j "$jobs" > "$out/build.log" 2>&1 || { grep -m20 -E "error|Error" "$out/build.log"; exit 1; }
log "built $build ($("$build/xtrain" --version))"

# 3. The GPU tests; their verdict comes after the table.
ctest_status=0
ctest --test-dir "$build" -R '^gpu\.' --output-on-failure --timeout 600 > "$out/gpu-tests.log" 2>&1 || ctest_status=$?
log "GPU tests done (ctest exit $ctest_status)"

# 4. The benchmark.
bench_args=(--recipe "$recipe" --device "$device" --dtype "$dtype" --steps "$steps" --warmup "$warmup"
            --xtrain "$build/xtrain" --python "$python" --work "$out/bench")
bash scripts/device/bench-train.sh "${bench_args[@]}" > "$out/bench.txt" 2> "$out/bench.err" ||
  { tail -20 "$out/bench.err"; echo "benchmark failed" > "$out/bench.txt"; }
log "benchmark done"

echo
echo "== $("$build/xtrain" --version)"
echo "== GPU tests"
{ grep -E "Test +#" "$out/gpu-tests.log" || true; } | sed -E 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: //; s/ \.+/ /; s/ +/ /g'
echo "== training benchmark ($device, $dtype, $recipe)"
cat "$out/bench.txt"
echo
verdict=(bash scripts/device/check-gpu-tests.sh "$out/gpu-tests.log" "$ctest_status")
if ((dry_run)); then verdict+=(--skips-expected); fi
"${verdict[@]}"

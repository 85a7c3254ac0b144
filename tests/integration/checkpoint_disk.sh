#!/usr/bin/env bash
# A full disk and a read-only run folder, on small tmpfs mounts: a checkpoint that does not fit
# ends the run with exit 1 naming the file and the free space, its temp folder is removed, and
# the checkpoint before it stays `latest` and verifies; a read-only run folder fails at start.
# Mounting needs root or unprivileged user namespaces; without either the test is skipped (77).
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
work=$(mktemp -d)
mounted=()
cleanup() {
  for dir in "${mounted[@]}"; do umount "$dir" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
mount_tmpfs() {  # DIR OPTIONS
  mkdir -p "$1"
  mount -t tmpfs -o "$2" tmpfs "$1" 2>/dev/null || return 1
  mounted+=("$1")
}
if ! mount_tmpfs "$work/full" size=3m; then
  echo "skipped: cannot mount a tmpfs here (needs root)"
  exit 77
fi
write_recipe "$work/recipe.yaml" 6
status=0
"$xtrain" train "$work/recipe.yaml" --set run.dir="$work/full/run" --set checkpoint.every=2 > "$work/full.log" 2>&1 || status=$?
[[ $status -eq 1 ]] || { cat "$work/full.log"; fail "disk full: exit $status, expected 1"; }
grep -q "^error: checkpoint step-4 could not be written: cannot write $work/full/run/checkpoints/.tmp-step-4-[a-z0-9]*/[a-z_]*.safetensors: No space left on device; its temp folder was removed, leaving [0-9.]* MiB free at $work/full/run/checkpoints; the checkpoints written before it are intact$" "$work/full.log" ||
  { cat "$work/full.log"; fail "disk full message"; }
[[ $(ls -A "$work/full/run/checkpoints") == $'latest\nstep-2' ]] || fail "left behind: $(ls -A "$work/full/run/checkpoints")"
"$xtrain" eval "$work/recipe.yaml" --set run.dir="$work/full/run" --set data.eval=builtin:demo-eval \
  --set train.eval_batches=1 > "$work/eval.log"
grep -q "^checkpoint: $work/full/run/checkpoints/step-2 (verified " "$work/eval.log" || fail "step-2 does not verify"
echo "disk full: exit 1 at step-4 naming the file and the free space, no temp folder left, step-2 intact"

mount_tmpfs "$work/readonly" ro,size=1m || fail "could not mount a read-only tmpfs"
status=0
"$xtrain" train "$work/recipe.yaml" --set run.dir="$work/readonly/run" > "$work/readonly.log" 2>&1 || status=$?
[[ $status -eq 1 ]] || { cat "$work/readonly.log"; fail "read-only: exit $status, expected 1"; }
grep -qx "error: cannot write the run folder $work/readonly/run: Read-only file system; set run.dir to a writable folder" "$work/readonly.log" ||
  { cat "$work/readonly.log"; fail "read-only message"; }
echo "read-only run folder: exit 1 naming it"

#!/usr/bin/env bash
# A data cache on a read-only filesystem (a tmpfs remounted read-only: chmod does not stop root)
# is listed and verified, since ls and verify only read; gc there is refused with exit 2 naming
# the folder; nothing in it changes.
source "$(dirname "$0")/lib.sh"

# A real cache, built by a run.
for i in $(seq 200); do echo "{\"text\": \"line $i of a small corpus to tokenize\"}"; done > "$work/corpus.jsonl"
write_recipe "$work/recipe.yaml" 1
expect_exit 0 "$work/train.log" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/run" \
  --set data.train="$work/corpus.jsonl" --set data.cache_dir="$work/cache" --set optim.warmup_steps=1 \
  --set data.seq_len=16 --set model.hidden_size=32 --set train.global_batch_size=2 --set train.micro_batch_size=2
entry=$(find "$work/cache" -mindepth 2 -maxdepth 2 -name entry.json -printf '%h\n')
[[ -n $entry ]] || fail "the run left no cache entry in $work/cache"

# Read-only: ls and verify work, gc is refused; nothing changes.
mkdir "$work/ro"
mount -t tmpfs -o size=4m tmpfs "$work/ro" || fail "cannot mount a tmpfs (the case needs root)"
trap 'umount "$work/ro" 2> /dev/null || true' EXIT
cp -a "$work/cache" "$work/ro/cache"
mount -o remount,ro "$work/ro" || fail "cannot make the tmpfs read-only"
guard_neighbours "$work/ro"
expect_exit 0 "$work/ls-ro.log" "$xtrain" data cache ls "$work/ro/cache"
expect_text "$work/ls-ro.log" "$work/ro/cache: 1 entries"
expect_exit 0 "$work/verify-ro.log" "$xtrain" data cache verify "$work/ro/cache"
expect_text "$work/verify-ro.log" "ok       $work/ro/cache/${entry##*/}"
expect_exit 2 "$work/gc-ro.log" "$xtrain" data cache gc "$work/ro/cache" --max-size 0
expect_text "$work/gc-ro.log" "$work/ro/cache: gc cannot remove anything there (Read-only file system); run gc where the cache folder is writable"
check_neighbours "$work/ro"
echo "data cache: a read-only cache listed and verified, gc refused"

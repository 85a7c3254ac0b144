#!/usr/bin/env bash
# `xtrain data cache` removes and lists only what the cache wrote: an entry is a folder named by
# its key holding the entry.json that names it. A user's folder given by mistake (holding a folder
# of 16 hex characters and its file) is refused by gc, ls and verify with exit 2, and nothing in
# it changes; in a real cache, a foreign folder of 16 hex characters (no entry.json) is left alone
# by gc --max-size 0, with a warning naming it, and the real entry is still removed.
source "$(dirname "$0")/lib.sh"

mkdir -p "$work/photos/0123456789abcdef"
echo "holiday" > "$work/photos/0123456789abcdef/beach.jpg"
echo "notes" > "$work/photos/list.txt"
guard_neighbours "$work/photos"
expect_exit 2 "$work/gc-user.log" "$xtrain" data cache gc "$work/photos" --max-size 0
expect_text "$work/gc-user.log" "$work/photos is not a data cache: it holds 2 items that the data cache did not write (0123456789abcdef, list.txt)"
check_neighbours "$work/photos"
expect_exit 2 "$work/ls-user.log" "$xtrain" data cache ls "$work/photos"
expect_text "$work/ls-user.log" "$work/photos is not a data cache"
expect_exit 2 "$work/verify-user.log" "$xtrain" data cache verify "$work/photos"
expect_text "$work/verify-user.log" "$work/photos is not a data cache"
check_neighbours "$work/photos"

# A real cache, built by a run, beside a foreign folder of 16 hex characters.
for i in $(seq 200); do echo "{\"text\": \"line $i of a small corpus to tokenize\"}"; done > "$work/corpus.jsonl"
write_recipe "$work/recipe.yaml" 1
expect_exit 0 "$work/train.log" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/run" \
  --set data.train="$work/corpus.jsonl" --set data.cache_dir="$work/cache" --set optim.warmup_steps=1 \
  --set data.seq_len=16 --set model.hidden_size=32 --set train.global_batch_size=2 --set train.micro_batch_size=2
entry=$(find "$work/cache" -mindepth 2 -maxdepth 2 -name entry.json -printf '%h\n')
[[ -n $entry ]] || fail "the run left no cache entry in $work/cache"
mkdir "$work/cache/fedcba9876543210"
echo "mine" > "$work/cache/fedcba9876543210/keep.txt"

guard_neighbours "$work/cache/fedcba9876543210"
expect_exit 0 "$work/gc.log" "$xtrain" data cache gc "$work/cache" --max-size 0
expect_text "$work/gc.log" "removed  $entry"
expect_text "$work/gc.log" "warning: $work/cache: leaving alone 1 item that the data cache did not write (fedcba9876543210)"
[[ ! -e $entry ]] || fail "gc --max-size 0 kept the entry $entry"
check_neighbours "$work/cache/fedcba9876543210"
echo "data cache: a user's folder refused by gc, ls and verify; a foreign folder in a cache left alone"

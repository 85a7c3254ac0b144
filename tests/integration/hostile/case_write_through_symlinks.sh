#!/usr/bin/env bash
# The other commands that write refuse to write through symbolic links: a run.dir that is a link
# (to a scratch folder standing in for /), a metrics.jsonl in the run folder linked to a file
# outside, and a `data prepare` temporary file linked to a file outside are refused with exit 2
# naming the link; the files outside are unchanged. A `data prepare` output that is a link is
# replaced by the file itself (a rename), never written through.
source "$(dirname "$0")/lib.sh"
write_recipe "$work/recipe.yaml" 2
mkdir -p "$work/root/etc" "$work/outside"
echo "root:x:0:0:root:/root:/bin/bash" > "$work/root/etc/passwd"
echo "precious" > "$work/outside/file"
guard_neighbours "$work/root"
guard_neighbours "$work/outside"

ln -s "$work/root" "$work/linked_run"
expect_exit 2 "$work/train.log" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/linked_run" \
  --set optim.warmup_steps=1
expect_text "$work/train.log" "run.dir $work/linked_run is a symbolic link (to $work/root)"
check_neighbours "$work/root"

mkdir "$work/run"
ln -s "$work/outside/file" "$work/run/metrics.jsonl"
expect_exit 2 "$work/train.log" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/run" --set optim.warmup_steps=1
expect_text "$work/train.log" "cannot write $work/run/metrics.jsonl: it is a symbolic link"
check_neighbours "$work/outside"

echo "some text to tokenize" > "$work/input.txt"
mkdir "$work/data"
ln -s "$work/outside/file" "$work/data/corpus.bin.tmp"
expect_exit 2 "$work/prepare.log" "$xtrain" data prepare --tokenizer byte --input "$work/input.txt" \
  --output "$work/data/corpus"
expect_text "$work/prepare.log" "cannot write $work/data/corpus.bin.tmp: it is a symbolic link"
check_neighbours "$work/outside"
rm "$work/data/corpus.bin.tmp"
ln -s "$work/outside/file" "$work/data/corpus.bin"
expect_exit 0 "$work/prepare.log" "$xtrain" data prepare --tokenizer byte --input "$work/input.txt" \
  --output "$work/data/corpus"
[[ -f $work/data/corpus.bin && ! -L $work/data/corpus.bin ]] || fail "corpus.bin is not a file of its own"
check_neighbours "$work/outside"
echo "train and data prepare: no write through a link"

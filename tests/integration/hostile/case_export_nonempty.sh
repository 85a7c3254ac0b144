#!/usr/bin/env bash
# `xtrain export` into a non-empty folder: refused with exit 2 (naming the folder and --overwrite)
# and the folder unchanged; with --overwrite, the export's files are replaced (here the single
# model.safetensors of the first export by shards and their index, as a fresh export writes them)
# and the user's own file stays.
source "$(dirname "$0")/lib.sh"
write_recipe "$work/recipe.yaml" 2
train run 1 --set optim.warmup_steps=1
checkpoint=$work/run/checkpoints/latest
expect_exit 0 "$work/first.log" "$xtrain" export "$checkpoint" "$work/target"
echo "my notes" > "$work/target/NOTES.md"
guard_neighbours "$work/target"
expect_exit 2 "$work/export.log" "$xtrain" export "$checkpoint" "$work/target"
expect_text "$work/export.log" "export target $work/target is not empty"
expect_text "$work/export.log" "pass --overwrite"
check_neighbours "$work/target"

expect_exit 0 "$work/fresh.log" "$xtrain" export "$checkpoint" "$work/fresh" --max-shard-size 300KB
expect_exit 0 "$work/overwrite.log" "$xtrain" export "$checkpoint" "$work/target" --max-shard-size 300KB --overwrite
[[ $(cat "$work/target/NOTES.md") == "my notes" ]] || fail "the user's NOTES.md changed"
[[ ! -e $work/target/model.safetensors ]] || fail "the earlier export's model.safetensors was left beside the shards"
for file in "$work"/fresh/*; do
  cmp "$file" "$work/target/$(basename "$file")" || fail "$(basename "$file") differs from a fresh export's"
done
[[ $(ls "$work/target" | wc -l) == $(($(ls "$work/fresh" | wc -l) + 1)) ]] || { ls "$work/target"; fail "unexpected files"; }
[[ -z $(find "$work" -maxdepth 1 -name '.target.export-*') ]] || fail "a staging folder was left beside the target"
echo "non-empty target: refused without --overwrite; with it, the export's files replaced and NOTES.md kept"

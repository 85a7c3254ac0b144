#!/usr/bin/env bash
# `xtrain export` into a folder where a file export writes is a symbolic link to a file outside
# (model.safetensors -> a stand-in for /etc/passwd), or a dangling link (config.json -> a file that
# does not exist yet): refused with exit 2 naming the link, with and without --overwrite; the file
# outside is unchanged, nothing appears outside, and the target folder is as it was.
source "$(dirname "$0")/lib.sh"
write_recipe "$work/recipe.yaml" 2
train run 1 --set optim.warmup_steps=1
mkdir -p "$work/outside" "$work/target"
echo "root:x:0:0:root:/root:/bin/bash" > "$work/outside/passwd"
guard_neighbours "$work/outside"
for link in model.safetensors:passwd config.json:created_through_link; do
  name=${link%%:*}
  rm -f "$work/target"/*
  ln -s "$work/outside/${link#*:}" "$work/target/$name"
  guard_neighbours "$work/target"
  for flag in "" --overwrite; do
    expect_exit 2 "$work/export.log" "$xtrain" export "$work/run/checkpoints/latest" "$work/target" $flag
    expect_text "$work/export.log" "$work/target/$name is a symbolic link (to $work/outside/${link#*:})"
    expect_text "$work/export.log" "remove the link"
    check_neighbours "$work/outside"
    check_neighbours "$work/target"
  done
done
echo "export through a linked file: refused, the file outside unchanged"

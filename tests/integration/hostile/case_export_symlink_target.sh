#!/usr/bin/env bash
# `xtrain export` to a symbolic link to a folder (here a scratch folder standing in for /, with an
# etc/passwd): refused with exit 2 naming the link, with or without a trailing slash or
# --overwrite; nothing in the folder it points to changes, and no staging folder is left beside it.
source "$(dirname "$0")/lib.sh"
write_recipe "$work/recipe.yaml" 2
train run 1 --set optim.warmup_steps=1
mkdir -p "$work/root/etc"
echo "root:x:0:0:root:/root:/bin/bash" > "$work/root/etc/passwd"
echo '{"user": "file"}' > "$work/root/config.json"
ln -s "$work/root" "$work/target"
guard_neighbours "$work/root"
for target in "$work/target" "$work/target/"; do
  for flag in "" --overwrite; do
    expect_exit 2 "$work/export.log" "$xtrain" export "$work/run/checkpoints/latest" "$target" $flag
    expect_text "$work/export.log" "export target $work/target is a symbolic link (to $work/root)"
    expect_text "$work/export.log" "give the folder itself"
    check_neighbours "$work/root"
  done
done
[[ -z $(find "$work" -maxdepth 1 -name '.target.export-*') ]] || fail "a staging folder was left beside the target"
echo "export to a link: refused, the folder behind it unchanged"

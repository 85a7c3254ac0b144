# A STOP that is not a regular file (a directory, a symlink) is refused naming it (exit 2) rather
# than stop every rerun after one step; a regular STOP left from before the start is removed and
# reported, and the run trains to its end.
source "$2/tests/integration/hostile/lib.sh"
mkdir -p neighbours && echo keep > neighbours/file && ln -s file neighbours/link && guard_neighbours "$work/neighbours"
write_recipe "$work/recipe.yaml" 3
mkdir -p run/STOP
expect_exit 2 "$work/dir.log" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/run"
expect_text "$work/dir.log" "$work/run/STOP is a directory: a STOP must be a regular file"
[[ -d run/STOP && ! -e run/checkpoints/latest ]] || fail "the STOP directory was touched or a step ran"
rmdir run/STOP
ln -s "$work/neighbours/file" run/STOP
expect_exit 2 "$work/link.log" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/run"
expect_text "$work/link.log" "$work/run/STOP is a symbolic link"
rm run/STOP
touch run/STOP
expect_exit 0 "$work/file.log" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/run"
expect_text "$work/file.log" "found $work/run/STOP before the first step: removed, not obeyed"
[[ ! -e run/STOP && -L run/checkpoints/latest ]] || fail "STOP left behind or no checkpoint"
check_neighbours "$work/neighbours"

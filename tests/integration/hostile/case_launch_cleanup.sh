# `xtrain launch` removes its temporary folder (TMPDIR/xtrain-launch-*) when it ends, after a
# failed launch too; --log-dir keeps the ranks' files where it says.
source "$2/tests/integration/hostile/lib.sh"
mkdir -p neighbours && echo keep > neighbours/file && guard_neighbours "$work/neighbours"
launch_dirs() { compgen -G "$work/xtrain-launch-*" || true; }
expect_exit 0 "$work/ok.log" "$xtrain" launch --nproc-per-node 2 --program bash -- -c 'echo rank $RANK'
[[ -z $(launch_dirs) ]] || fail "a successful launch left $(launch_dirs)"
expect_exit 1 "$work/failed.log" "$xtrain" launch --nproc-per-node 2 --program bash -- -c 'exit 3'
expect_text "$work/failed.log" "  exitcode  : 3 (pid: "
[[ -z $(launch_dirs) ]] || fail "a failed launch left $(launch_dirs)"
expect_exit 2 "$work/bad.log" "$xtrain" launch --nproc-per-node 2 -- train "$work/no-such-recipe.yaml"
expect_text "$work/bad.log" "error_file: <removed with the launch's temporary folder; --log-dir DIR keeps it>"
expect_text "$work/bad.log" "no-such-recipe.yaml"
[[ -z $(launch_dirs) ]] || fail "a launch that failed on bad input left $(launch_dirs)"
expect_exit 2 "$work/kept.log" "$xtrain" launch --nproc-per-node 2 --log-dir "$work/logs" -- train "$work/no-such-recipe.yaml"
# The first rank to fail writes its error file; the launcher then stops the other, which may not.
compgen -G "$work/logs/attempt_0/rank_[01].error.json" > /dev/null || fail "--log-dir did not keep the error file"
[[ -z $(launch_dirs) ]] || fail "a launch with --log-dir left $(launch_dirs)"
check_neighbours "$work/neighbours"

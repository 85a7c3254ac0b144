# Resuming with a changed run.seed or data source is refused (exit 2), naming each difference,
# unless --allow-data-change says so; the refused run writes nothing.
source "$2/tests/integration/hostile/lib.sh"
mkdir -p neighbours && echo keep > neighbours/file && guard_neighbours "$work/neighbours"
write_recipe "$work/recipe.yaml" 5
train run 1
guard_neighbours "$work/run"
expect_exit 2 "$work/seed.log" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/run" --set train.steps=7 \
  --set run.seed=7 --set data.train=builtin:demo-eval
expect_text "$work/seed.log" "$work/run/checkpoints/step-5: the recipe changes which samples the next steps read since this checkpoint (run.seed: 1234 -> 7; data.train: "
expect_text "$work/seed.log" "-> builtin:demo-eval), so the run would not continue as it would have. Use the checkpoint's values, or pass --allow-data-change"
check_neighbours "$work/run"
expect_exit 0 "$work/allowed.log" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/run" --set train.steps=7 \
  --set run.seed=7 --allow-data-change
expect_text "$work/allowed.log" "notice: changed since the checkpoint: run.seed: 1234 -> 7"
expect_text "$work/allowed.log" "resumed from $work/run/checkpoints/step-5 at step 5"
check_neighbours "$work/neighbours"

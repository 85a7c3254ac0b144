# A smoke run of a real recipe (--set train.steps=6 with optim.warmup_steps: 30) trains with a
# warning: the recipe's schedule cut short, the rate still climbing at the last step.
source "$2/tests/integration/hostile/lib.sh"
mkdir -p neighbours && echo keep > neighbours/file && guard_neighbours "$work/neighbours"
write_recipe "$work/recipe.yaml" 100
expect_exit 0 "$work/run.log" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/run" \
  --set train.steps=6 --set optim.warmup_steps=30 --set train.log_every=1
expect_text "$work/run.log" "warning: optim.warmup_steps 30 is longer than train.steps 6: the learning rate warms up for the whole run"
# lr 3e-3 x step/30: step 6 trains at 6.00e-04, as in the 30-step warmup of the full recipe
expect_text "$work/run.log" "step 6/6 | loss"
grep -q "^step 6/6 .* lr 6.00e-04 " "$work/run.log" || { cat "$work/run.log"; fail "step 6 is not at lr 6.00e-04"; }
check_neighbours "$work/neighbours"

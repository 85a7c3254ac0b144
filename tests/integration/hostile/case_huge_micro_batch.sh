# A micro batch of 10,000,000 sequences is refused before the first step (exit 2, naming the micro
# batch that would fit), within seconds, with no run folder written and the neighbours unchanged.
source "$(dirname "$0")/lib.sh"
mkdir -p "$work/neighbours" && echo "keep" > "$work/neighbours/file"
guard_neighbours "$work/neighbours"
write_recipe "$work/recipe.yaml" 10
start=$(date +%s)
expect_exit 2 "$work/huge.log" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/run" \
  --set train.micro_batch_size=10000000 --set train.global_batch_size=10000000
expect_text "$work/huge.log" "train.micro_batch_size: 10000000 sequences of 64 tokens keep at least"
expect_text "$work/huge.log" "would fit this bound (it divides the 10000000 sequences a data rank takes per step)"
(($(date +%s) - start < 10)) || fail "the refusal took $(($(date +%s) - start)) s"
[[ ! -e $work/run ]] || fail "a refused run wrote $work/run"
check_neighbours "$work/neighbours"
cat "$work/huge.log"

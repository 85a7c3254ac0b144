# Preference data (data.objective dpo) that cannot train: a record without "chosen", an empty
# completion, a prompt that fills data.seq_len. Each exits 2 naming the file and line and the
# fix, before the run folder is touched: an earlier run's folder keeps every byte.
source "$2/tests/integration/hostile/lib.sh"
write_recipe "$work/recipe.yaml" 2
printf '%s\n' '{"prompt": "1+1=", "chosen": "2", "rejected": "3"}' '{"prompt": "2+2=", "chosen": "4", "rejected": "5"}' \
  > "$work/good.jsonl"
dpo=(--set data.objective=dpo --set data.tokenizer=byte --set data.seq_len=16 --set checkpoint.every=2 --set train.log_every=1)
expect_exit 0 "$work/run.log" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/run" "${dpo[@]}" \
  --set data.train="$work/good.jsonl"
expect_text "$work/run.log" "margin"
guard_neighbours "$work/run"

refused() {
  printf '%s\n' '{"prompt": "1+1=", "chosen": "2", "rejected": "3"}' "$1" > "$work/bad.jsonl"
  expect_refusal 2 "$work/bad.log" "$2" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/run" "${dpo[@]}" \
    --set data.train="$work/bad.jsonl"
  tail -1 "$work/bad.log"
}
refused '{"prompt": "a", "rejected": "b"}' "data.train ($work/bad.jsonl): $work/bad.jsonl:2: the record has no \"chosen\""
refused '{"prompt": "a", "chosen": "b", "rejected": ""}' "$work/bad.jsonl:2: \"rejected\" is empty"
refused '{"prompt": "the prompt is too long", "chosen": "a", "rejected": "b"}' \
  "$work/bad.jsonl:2: the prompt is 22 tokens, and data.seq_len 16 leaves no room for a completion after it: raise data.seq_len above 22, or shorten the prompt"
check_neighbours "$work/run"

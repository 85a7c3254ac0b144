#!/usr/bin/env bash
# data.cache_dir end to end: two runs started together make one entry (one tokenizes, the other
# waits and reads it); the losses with the cache equal those without it, bit for bit; a flipped
# byte in a shard is found by checksum, reported with the entry and the file, and rebuilt, never
# trained on; an appended line makes a new key; `xtrain data cache ls | verify | gc --max-size`;
# an unusable cache folder is bad input (exit 2) naming it.
set -euo pipefail
xtrain=$1
source_dir=$2
python=${XTRAIN_PYTHON:-$source_dir/.venv/bin/python3}
source "$source_dir/tests/integration/lib/expect.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! "$python" -c "import tokenizers" 2> /dev/null; then
  echo "error: $python cannot import tokenizers, which trains the test's tokenizer.json" >&2
  echo "  (scripts/setup-deps.sh installs it from requirements/python.txt)" >&2
  exit 1
fi
# 16 MB of JSONL and a byte-level BPE: tokenizing takes about a second, longer than the second
# run needs to reach the lock.
"$python" "$source_dir/tools/data/make_bench_corpus.py" "$work/corpus.jsonl" 16 --sample "$work/sample.txt" 100000
"$python" "$source_dir/tools/data/train_hf_bpe.py" "$work/sample.txt" "$work/tokenizers" 500 > /dev/null
cache=$work/cache
cat > "$work/recipe.yaml" <<YAML
name: data-cache
data:
  train: $work/corpus.jsonl
  tokenizer: hf:$work/tokenizers/gpt2.json
  seq_len: 32
model:
  hidden_size: 32
  num_layers: 1
  num_heads: 2
train:
  steps: 3
  global_batch_size: 2
  micro_batch_size: 2
  threads: 1
checkpoint:
  resume: never
YAML
train() {  # train NAME [--set ...]: a run in $work/NAME, its output in $work/NAME.log
  local name=$1
  shift
  "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/$name" "$@" > "$work/$name.log" 2>&1 ||
    { cat "$work/$name.log"; fail "run $name failed"; }
}
losses() { grep -o '"loss":[^,]*' "$1/metrics.jsonl"; }
same_losses() {
  diff <(losses "$work/$1") <(losses "$work/$2") > /dev/null || fail "losses of $2 differ from $1's"
}
entries() { find "$cache" -mindepth 1 -maxdepth 1 -type d -name '????????????????' | wc -l; }

train plain
[[ $(losses "$work/plain" | wc -l) -eq 3 ]] || fail "no losses in the plain run"

# Two runs started together: one entry, tokenized once.
train first --set data.cache_dir="$cache" &
first=$!
train second --set data.cache_dir="$cache" &
second=$!
wait $first
wait $second
cat "$work/first.log" "$work/second.log" | grep "^data cache:" > "$work/together.log"
cat "$work/together.log"
[[ $(grep -c "tokenized into" "$work/together.log") -eq 1 ]] || fail "not exactly one run tokenized"
[[ $(grep -c "read from .*after waiting for another process" "$work/together.log") -eq 1 ]] ||
  fail "the other run did not wait for the entry"
[[ $(entries) -eq 1 ]] || fail "$(entries) entries, expected 1"
same_losses plain first
same_losses plain second

train warm --set data.cache_dir="$cache"
expect_text "$work/warm.log" "data cache: $work/corpus.jsonl read from"
same_losses plain warm

"$xtrain" data cache ls "$cache" | tee "$work/ls.log"
expect_text "$work/ls.log" "1 entries"
expect_text "$work/ls.log" "ok       $work/corpus.jsonl"

# A flipped byte in the token shard: verify names it; the next run rebuilds the entry.
entry=$(find "$cache" -mindepth 1 -maxdepth 1 -type d -name '????????????????')
"$python" - "$entry/tokens.bin" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(1000)
    byte = f.read(1)
    f.seek(1000)
    f.write(bytes([byte[0] ^ 0x20]))
PY
expect_exit 1 "$work/verify-damaged.log" "$xtrain" data cache verify "$cache"
cat "$work/verify-damaged.log"
expect_text "$work/verify-damaged.log" "damaged  $entry: tokens.bin: checksum mismatch"
train repaired --set data.cache_dir="$cache"
grep "warning: data cache" "$work/repaired.log"
expect_text "$work/repaired.log" "warning: data cache entry $entry is damaged (tokens.bin: checksum mismatch"
expect_text "$work/repaired.log" "tokenized into $entry"
same_losses plain repaired
expect_exit 0 "$work/verify.log" "$xtrain" data cache verify "$cache"
cat "$work/verify.log"
expect_text "$work/verify.log" "every entry intact"

# An appended line: a new key, and the old entry is stale.
echo '{"text": "one more line"}' >> "$work/corpus.jsonl"
train changed --set data.cache_dir="$cache"
expect_text "$work/changed.log" "tokenized into"
[[ $(entries) -eq 2 ]] || fail "$(entries) entries after the source changed, expected 2"
"$xtrain" data cache ls "$cache" | tee "$work/ls-changed.log"
expect_text "$work/ls-changed.log" "stale    $work/corpus.jsonl ($work/corpus.jsonl changed)"

# gc down to one entry's size keeps the one used last.
size=$(du -sb "$(find "$cache" -mindepth 1 -maxdepth 1 -type d -newer "$entry" -name '????????????????')" | cut -f1)
"$xtrain" data cache gc "$cache" --max-size "$size" | tee "$work/gc.log"
expect_text "$work/gc.log" "removed  $entry"
[[ $(entries) -eq 1 ]] || fail "$(entries) entries after gc, expected 1"
"$xtrain" data cache gc "$cache" --max-size 0 > "$work/gc0.log"
[[ $(entries) -eq 0 ]] || fail "gc --max-size 0 left entries"

# Bad input: a cache folder that cannot be made, and a size that is not one.
expect_exit 2 "$work/bad-dir.log" "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/bad" \
  --set data.cache_dir="$work/corpus.jsonl/cache"
expect_text "$work/bad-dir.log" "data.cache_dir $work/corpus.jsonl/cache: cannot create the folder"
expect_exit 2 "$work/bad-size.log" "$xtrain" data cache gc "$cache" --max-size lots
expect_text "$work/bad-size.log" "'lots' is not a size"
expect_exit 2 "$work/no-cache.log" "$xtrain" data cache ls "$work/nowhere"
echo "data cache: ok"

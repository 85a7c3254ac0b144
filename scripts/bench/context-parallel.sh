#!/usr/bin/env bash
# Context parallelism measured, one table each:
#   memory   peak resident memory per rank for one sequence of 16,384 and one of 32,768 tokens
#            (2 layers, hidden 128, 4 heads, byte vocabulary, fp32, blockwise attention, chunked
#            loss), at cp 1, 2 and 4, ring and Ulysses; a rank's activation memory is its step
#            peak less its peak at the end of set-up ("memory at start"), and the ratio per
#            doubling of cp is printed beside it. The ring rows also give each step's attention
#            and blocked time (cp.ring_attention_s, cp.ring_blocked_s): how much of the k/v
#            transfers the attention hides. The runs fix glibc's mmap threshold at 128 KiB
#            (MALLOC_MMAP_THRESHOLD_): left dynamic, it rises to 32 MiB after the first frees and
#            glibc keeps freed tensors in its heap, so that the peak resident memory tells more of
#            the allocator's history than of the tensors alive at once (Ulysses cp 2 at 32,768
#            tokens: 754 MiB of activations with it dynamic, against ring's 526).
#   balance  a packed corpus of skewed document lengths (a few documents of thousands of bytes
#            among many of tens), rows of 4 x 1024 tokens over cp 4: the cp ranks' max / mean
#            causal attention work (cp.attention_cost_max_over_mean) with parallel.cp_balance
#            true and false, averaged over the steps.
# Every rank runs one thread, so cp 4's four ranks share the machine's cores: the memory figures
# are per rank, the times are not a speed comparison.
#   scripts/bench/context-parallel.sh [memory] [balance]   (default: both)
set -euo pipefail
cd "$(dirname "$0")/../.."
parts=("$@")
((${#parts[@]})) || parts=(memory balance)
bash scripts/build.sh > /dev/null
work=${WORK_DIR:-$(mktemp -d)}
mkdir -p "$work"
python=${XTRAIN_PYTHON:-.venv/bin/python3}

free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
run() {  # run NAME NPROC [--set ...]
  local name=$1 nproc=$2
  shift 2
  local command=(build/xtrain train)
  ((nproc == 1)) || command=(build/xtrain launch --nproc-per-node "$nproc" --master-port "$(free_port)" -- train)
  rm -rf "${work:?}/$name"
  "${command[@]}" "$work/recipe.yaml" --set run.dir="$work/$name" "$@" > "$work/$name.log" 2>&1 || {
    cat "$work/$name.log"
    return 1
  }
}

memory() {
  export MALLOC_MMAP_THRESHOLD_=131072
  cat > "$work/recipe.yaml" <<'YAML'
name: cp-memory
model: {hidden_size: 128, num_layers: 2, num_heads: 4, num_kv_heads: 4, max_seq_len: 32768}
train: {steps: 2, global_batch_size: 1, micro_batch_size: 1, log_every: 1, threads: 1}
memory: {attention: blockwise, chunked_loss: 4096}
checkpoint: {every: 0}
YAML
  for seq in 16384 32768; do
    run "cp1-$seq" 1 --set data.seq_len=$seq
    for cp in 2 4; do
      for kind in ring ulysses; do
        run "$kind-cp$cp-$seq" $cp --set data.seq_len=$seq --set parallel.cp=$cp --set parallel.cp_kind=$kind
      done
    done
  done
  unset MALLOC_MMAP_THRESHOLD_
  "$python" - "$work" <<'PY'
import json, re, sys
work = sys.argv[1]
def measure(name):
    log = open(f"{work}/{name}.log").read()
    start = float(re.search(r"memory at start: peak resident (\d+) MiB", log).group(1))
    steps = [json.loads(l) for l in open(f"{work}/{name}/metrics.jsonl") if '"loss"' in l]
    peak = max(s["peak_rss_mib"] for s in steps)
    ring = (steps[-1].get("cp.ring_attention_s"), steps[-1].get("cp.ring_blocked_s"))
    return start, peak, peak - start, steps[-1]["step_s"], ring
print("\n| tokens | layout | set-up peak (MiB) | step peak (MiB) | activations (MiB) | per doubling of cp | step (s) | ring attention / blocked (s) |")
print("|---|---|---|---|---|---|---|---|")
for seq in (16384, 32768):
    base = measure(f"cp1-{seq}")
    for kind in ("ring", "ulysses"):
        previous = base
        rows = [("cp 1", base, "")]
        for cp in (2, 4):
            m = measure(f"{kind}-cp{cp}-{seq}")
            rows.append((f"{kind} cp {cp}", m, f"{previous[2] / m[2]:.2f}x"))
            previous = m
        for label, m, ratio in rows:
            if label == "cp 1" and kind == "ulysses":
                continue
            ring = f"{m[4][0]:.2f} / {m[4][1]:.2f}" if m[4][0] is not None else ""
            print(f"| {seq} | {label} | {m[0]:.0f} | {m[1]:.0f} | {m[2]:.0f} | {ratio} | {m[3]:.1f} | {ring} |")
PY
}

balance() {
  # Documents of 20-80 bytes, and one in 25 of 2000-4000: most rows hold one long document
  # among short ones, which head-tail splits unevenly.
  "$python" - "$work/skewed.jsonl" <<'PY'
import json, random, sys
random.seed(3)
words = "the of and to in is was for on that with as by at from it an be this are".split()
with open(sys.argv[1], "w") as out:
    for i in range(3000):
        length = random.randint(2000, 4000) if i % 25 == 0 else random.randint(20, 80)
        text = ""
        while len(text) < length:
            text += random.choice(words) + " "
        out.write(json.dumps({"text": text[:length]}) + "\n")
PY
  cat > "$work/recipe.yaml" <<YAML
name: cp-balance
model: {hidden_size: 64, num_layers: 1, num_heads: 4, num_kv_heads: 4}
data: {train: $work/skewed.jsonl, seq_len: 1024, pack: true}
train: {steps: 20, global_batch_size: 4, micro_batch_size: 4, log_every: 5, threads: 1}
checkpoint: {every: 0}
YAML
  for balance in false true; do run "balance-$balance" 4 --set parallel.cp=4 --set parallel.cp_balance=$balance; done
  "$python" - "$work" <<'PY'
import json, sys
work = sys.argv[1]
print("\n| parallel.cp_balance | max / mean causal work per cp rank (mean over steps) | worst step |")
print("|---|---|---|")
for balance in ("false", "true"):
    spreads = [r["cp.attention_cost_max_over_mean"] for r in map(json.loads, open(f"{work}/balance-{balance}/metrics.jsonl")) if "loss" in r]
    print(f"| {balance} | {sum(spreads) / len(spreads):.3f} | {max(spreads):.3f} |")
PY
}

for part in "${parts[@]}"; do
  case $part in
    memory | balance) "$part" ;;
    *) echo "context-parallel.sh: unknown part $part (memory, balance)" >&2; exit 2 ;;
  esac
done

#!/usr/bin/env bash
# Trains the same model (recipes/bench-cpu.yaml) with xtrain and with the PyTorch Python
# reference (tools/reference/train_bench.py), same threads, batch and dtype, in one
# invocation, and prints tokens/s of both, their ratio and each one's model FLOP utilisation
# against the matmul rate (same dtype) measured in the same invocation. The engines run in
# alternating rounds and medians are reported, because these machines are noisy.
#   scripts/bench-cpu.sh [--threads N] [--dtype fp32|bf16] [--steps N] [--rounds N]
set -euo pipefail
cd "$(dirname "$0")/.."
threads=$(nproc)
dtype=fp32
steps=10
rounds=3
while (($#)); do
  case $1 in
    --threads) threads=$2; shift 2 ;;
    --dtype) dtype=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
bash scripts/build.sh >/dev/null
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
warmup=2
read -r batch seq < <(build/xtrain validate recipes/bench-cpu.yaml | awk '/global_batch_size/{b=$2} /seq_len/{s=$2} END{print b, s}')

for round in $(seq 1 "$rounds"); do
  build/xtrain env > "$work/env-$round.txt"
  build/xtrain train recipes/bench-cpu.yaml --set run.dir="$work/run-$round" --set train.threads="$threads" \
    --set train.dtype="$dtype" --set train.steps=$((steps + warmup)) > "$work/xtrain-$round.log"
  /usr/bin/python3 tools/reference/train_bench.py --config "$work/run-$round/checkpoints/latest/config.json" \
    --batch "$batch" --seq "$seq" --steps "$steps" --warmup "$warmup" --threads "$threads" --dtype "$dtype" \
    > "$work/reference-$round.json"
done

/usr/bin/python3 - "$work" "$rounds" "$warmup" "$threads" "$dtype" <<'PY'
import json, re, statistics, sys
work, rounds, warmup, threads, dtype = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
median = statistics.median
matmul = median(float(re.search(rf"^{dtype} matmul 1024\^3: ([0-9.]+)", open(f"{work}/env-{r}.txt").read(), re.M).group(1))
                for r in range(1, rounds + 1))
xtrain, reference = [], []
for r in range(1, rounds + 1):
    steps = [json.loads(line) for line in open(f"{work}/run-{r}/metrics.jsonl") if '"loss"' in line]
    xtrain.append(median(s["tokens_per_s"] for s in steps[warmup:]))
    reference.append(json.load(open(f"{work}/reference-{r}.json"))["tokens_per_s"])
config = json.load(open(f"{work}/run-1/checkpoints/latest/config.json"))
h, L, V, I = config["hidden_size"], config["num_hidden_layers"], config["vocab_size"], config["intermediate_size"]
kv = config["num_key_value_heads"] * h // config["num_attention_heads"]
params = V * h * (1 if config["tie_word_embeddings"] else 2) + L * (2 * h * h + 2 * h * kv + 3 * h * I + 2 * h) + h
ref = json.load(open(f"{work}/reference-1.json"))
seq = ref["seq"]
flops_per_token = 6 * params + 12 * L * h * seq
mfu = lambda tps: tps * flops_per_token / (matmul * 1e9)
print(f"model {params/1e6:.2f}M params, seq {seq}, batch {ref['batch']}, dtype {dtype}, threads {threads}, "
      f"{rounds} alternating rounds")
print(f"{dtype} matmul rate (1024^3, same invocation): {matmul:.1f} GFLOP/s; {flops_per_token/1e6:.2f} MFLOP/token")
print(f"{'engine':<16}{'tokens/s':>12}{'MFU':>8}   per round")
for name, values in (("xtrain", xtrain), ("pytorch-eager", reference)):
    print(f"{name:<16}{median(values):>12.0f}{mfu(median(values)):>8.1%}   {' '.join(f'{v:.0f}' for v in values)}")
ratios = [x / p for x, p in zip(xtrain, reference)]
print(f"ratio xtrain / pytorch-eager: {median(ratios):.3f} (median of rounds: {' '.join(f'{r:.3f}' for r in ratios)})")
PY

#!/usr/bin/env bash
# Trains the same model (recipes/bench-cpu.yaml) with xtrain and with the PyTorch Python
# reference (tools/reference/train_bench.py), same threads, batch and dtype, in one
# invocation, and prints tokens/s of both, their ratio and each one's model FLOP utilisation
# against an fp32 matmul rate measured in the same invocation.
#   scripts/bench-cpu.sh [--threads N] [--dtype fp32|bf16] [--steps N]
set -euo pipefail
cd "$(dirname "$0")/.."
threads=$(nproc)
dtype=fp32
steps=12
while (($#)); do
  case $1 in
    --threads) threads=$2; shift 2 ;;
    --dtype) dtype=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
bash scripts/build.sh >/dev/null
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
warmup=2

matmul=$(build/xtrain env | sed -nE 's/^fp32 matmul 1024\^3: ([0-9.]+) GFLOP\/s$/\1/p')
build/xtrain train recipes/bench-cpu.yaml --set run.dir="$work/run" --set train.threads="$threads" \
  --set train.dtype="$dtype" --set train.steps=$((steps + warmup)) > "$work/xtrain.log"
config="$work/run/checkpoints/latest/config.json"
read -r batch seq < <(build/xtrain validate recipes/bench-cpu.yaml | awk '/global_batch_size/{b=$2} /seq_len/{s=$2} END{print b, s}')
/usr/bin/python3 tools/reference/train_bench.py --config "$config" --batch "$batch" --seq "$seq" \
  --steps "$steps" --warmup "$warmup" --threads "$threads" --dtype "$dtype" > "$work/reference.json"

/usr/bin/python3 - "$work" "$matmul" "$warmup" "$threads" "$dtype" <<'PY'
import json, statistics, sys
work, matmul, warmup, threads, dtype = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
config = json.load(open(f"{work}/run/checkpoints/latest/config.json"))
steps = [json.loads(line) for line in open(f"{work}/run/metrics.jsonl") if '"loss"' in line]
xtrain = statistics.median(s["tokens_per_s"] for s in steps[warmup:])
reference = json.load(open(f"{work}/reference.json"))
h, L, V, I = config["hidden_size"], config["num_hidden_layers"], config["vocab_size"], config["intermediate_size"]
kv = config["num_key_value_heads"] * h // config["num_attention_heads"]
params = V * h * (1 if config["tie_word_embeddings"] else 2) + L * (2 * h * h + 2 * h * kv + 3 * h * I + 2 * h) + h
seq = reference["seq"]
flops_per_token = 6 * params + 12 * L * h * seq
mfu = lambda tps: tps * flops_per_token / (matmul * 1e9)
rows = [("xtrain", xtrain), ("pytorch-eager", reference["tokens_per_s"])]
print(f"model {params/1e6:.2f}M params, seq {seq}, batch {reference['batch']}, dtype {dtype}, threads {threads}")
print(f"fp32 matmul rate (1024^3, same invocation): {matmul:.1f} GFLOP/s; {flops_per_token/1e6:.2f} MFLOP/token")
print(f"{'engine':<16}{'tokens/s':>12}{'MFU':>8}")
for name, tps in rows:
    print(f"{name:<16}{tps:>12.0f}{mfu(tps):>8.1%}")
print(f"ratio xtrain / pytorch-eager: {xtrain / reference['tokens_per_s']:.3f}")
PY

#!/usr/bin/env bash
# One training benchmark on one device: the recipe's model trained by xtrain, by PyTorch eager
# (transformers' LlamaForCausalLM built from the config.json xtrain writes) and by torch.compile,
# same batch, sequence, dtype and device, and the matmul ceiling of that dtype measured in the
# same call. Prints a table: tokens/s, MFU (6 N + 12 L H T FLOPs per token against the measured
# ceiling), peak device memory, and the ratios. Steps after the warmup are timed; medians.
#   bench-train.sh --recipe R --device cpu|cuda --dtype fp32|bf16 --steps N --warmup W
#                  --xtrain BIN --python PY --work DIR
set -euo pipefail
while (($#)); do
  case $1 in
    --recipe) recipe=$2 ;; --device) device=$2 ;; --dtype) dtype=$2 ;; --steps) steps=$2 ;;
    --warmup) warmup=$2 ;; --xtrain) xtrain=$2 ;; --python) python=$2 ;; --work) work=$2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift 2
done
mkdir -p "$work"
read -r batch seq < <("$xtrain" validate "$recipe" | awk '/global_batch_size/{b=$2} /seq_len/{s=$2} END{print b, s}')
"$xtrain" train "$recipe" --set run.dir="$work/xtrain" --set train.device="$device" --set train.dtype="$dtype" \
  --set train.steps=$((steps + warmup)) --set train.log_every=1 > "$work/xtrain.log" 2>&1 ||
  { tail -20 "$work/xtrain.log" >&2; exit 1; }
config=$work/xtrain/checkpoints/latest/config.json
for engine in eager compile; do
  flags=()
  [[ $engine == compile ]] && flags=(--compile)
  "$python" tools/reference/train_bench.py --config "$config" --batch "$batch" --seq "$seq" --steps "$steps" \
    --warmup "$warmup" --dtype "$dtype" --device "$device" --matmul-size 0 "${flags[@]}" > "$work/$engine.json" \
    2> "$work/$engine.err" || { tail -20 "$work/$engine.err" >&2; exit 1; }
done
"$python" - "$work" "$warmup" "$device" "$dtype" "$batch" "$seq" <<'PY'
import json, statistics, sys, time
import torch
work, warmup, device, dtype, batch, seq = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
config = json.load(open(f"{work}/xtrain/checkpoints/latest/config.json"))
h, layers, vocab, inter = config["hidden_size"], config["num_hidden_layers"], config["vocab_size"], config["intermediate_size"]
kv = config["num_key_value_heads"] * h // config["num_attention_heads"]
params = vocab * h * (1 if config.get("tie_word_embeddings") else 2) + layers * (2 * h * h + 2 * h * kv + 3 * h * inter + 2 * h) + h
flops_per_token = 6 * params + 12 * layers * h * seq

# The ceiling: an n^3 matmul of the dtype on the device, median of 10.
n = 8192 if device == "cuda" else 1024
tdtype = torch.bfloat16 if dtype == "bf16" else torch.float32
a = torch.randn(n, n, device=device, dtype=tdtype); b = torch.randn(n, n, device=device, dtype=tdtype)
sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
for _ in range(3): a @ b
sync()
times = []
for _ in range(10):
    t = time.perf_counter(); a @ b; sync(); times.append(time.perf_counter() - t)
ceiling = 2 * n ** 3 / statistics.median(times)

rows = []
records = [json.loads(l) for l in open(f"{work}/xtrain/metrics.jsonl") if '"loss"' in l]
timed = records[warmup:]
x_tps = batch * seq / statistics.median(r["step_s"] for r in timed)
rows.append(("xtrain", x_tps, max(r.get("peak_device_mib", 0) for r in records)))
for engine in ("eager", "compile"):
    r = json.load(open(f"{work}/{engine}.json"))
    rows.append((f"PyTorch {engine}", r["tokens_per_s"], r.get("peak_device_mib", 0)))
print(f"model {params / 1e9:.3f}B parameters, batch {batch} x {seq}, {dtype} on {device}; "
      f"{dtype} matmul ceiling ({n}^3) {ceiling / 1e12:.2f} TFLOP/s")
print(f"{'engine':<16} {'tokens/s':>12} {'MFU':>7} {'peak MiB':>9} {'xtrain / engine':>16}")
for name, tps, peak in rows:
    print(f"{name:<16} {tps:>12.0f} {100 * tps * flops_per_token / ceiling:>6.1f}% {peak:>9.0f} {x_tps / tps:>16.3f}")
PY

#!/usr/bin/env bash
# Trains the same model (recipes/bench-cpu.yaml) with xtrain, with Hugging Face transformers'
# LlamaForCausalLM in PyTorch eager mode, and with the same model under torch.compile (inductor),
# all built from the config.json xtrain writes (tools/reference/train_bench.py), with the same
# threads, batch, sequence length and dtype (fp32, or bf16 autocast), in one invocation. Prints
# per dtype a table of tokens/s and model FLOP utilisation against the matmul rate (same dtype,
# same threads) measured in the same invocation, torch.compile's compile time (kept out of the
# step timings, like every warmup step), and the ratios xtrain / eager and xtrain / compile. The
# engines run in alternating rounds and medians are reported, because these machines are noisy.
# torch.compile's cache lives in the run's scratch folder: round 1 compiles from scratch, later
# rounds reuse what it compiled, and both times are shown.
#   scripts/bench/cpu.sh [--threads N] [--dtype fp32|bf16|both] [--steps N] [--rounds N]
#                        [--attn sdpa|eager]
# --attn is the transformers attention implementation (default sdpa, transformers' own default).
# Python comes from $XTRAIN_PYTHON, else the project's .venv.
set -euo pipefail
cd "$(dirname "$0")/../.."
threads=$(nproc)
dtype=fp32
steps=10
rounds=3
attn=sdpa
while (($#)); do
  case $1 in
    --threads) threads=$2; shift 2 ;;
    --dtype) dtype=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --attn) attn=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
case $dtype in
  fp32 | bf16) dtypes=("$dtype") ;;
  both) dtypes=(fp32 bf16) ;;
  *) echo "--dtype must be fp32, bf16 or both, got $dtype" >&2; exit 2 ;;
esac
python=${XTRAIN_PYTHON:-.venv/bin/python3}
[[ -x $python ]] || { echo "no Python at $python: run scripts/setup-deps.sh or set XTRAIN_PYTHON" >&2; exit 2; }
bash scripts/build.sh >/dev/null
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TORCHINDUCTOR_CACHE_DIR=$work/inductor
warmup=2
read -r batch seq < <(build/xtrain validate recipes/bench-cpu.yaml | awk '/global_batch_size/{b=$2} /seq_len/{s=$2} END{print b, s}')

# run LOG COMMAND...: runs COMMAND with stderr in LOG, shown if it fails.
run() {
  local log=$1
  shift
  "$@" 2> "$log" || { cat "$log" >&2; return 1; }
}

for dt in "${dtypes[@]}"; do
  for round in $(seq 1 "$rounds"); do
    tag=$dt-$round
    build/xtrain env > "$work/env-$tag.txt"
    run "$work/xtrain-$tag.err" build/xtrain train recipes/bench-cpu.yaml --set run.dir="$work/run-$tag" \
      --set train.threads="$threads" --set train.dtype="$dt" --set train.steps=$((steps + warmup)) \
      --set train.log_every=1 > "$work/xtrain-$tag.log"
    bench=(tools/reference/train_bench.py --config "$work/run-$tag/checkpoints/latest/config.json" --batch "$batch"
      --seq "$seq" --steps "$steps" --warmup "$warmup" --threads "$threads" --dtype "$dt" --attn "$attn")
    run "$work/eager-$tag.err" "$python" "${bench[@]}" > "$work/eager-$tag.json"
    run "$work/compile-$tag.err" "$python" "${bench[@]}" --compile > "$work/compile-$tag.json"
  done
done

"$python" - "$work" "$rounds" "$warmup" "$threads" "${dtypes[@]}" <<'PY'
import json, re, statistics, sys
work, rounds, warmup, threads, dtypes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5:]
median = statistics.median
spread = lambda values, fmt: " ".join(format(v, fmt) for v in values)
config = json.load(open(f"{work}/run-{dtypes[0]}-1/checkpoints/latest/config.json"))
h, L, V, I = config["hidden_size"], config["num_hidden_layers"], config["vocab_size"], config["intermediate_size"]
kv = config["num_key_value_heads"] * h // config["num_attention_heads"]
params = V * h * (1 if config["tie_word_embeddings"] else 2) + L * (2 * h * h + 2 * h * kv + 3 * h * I + 2 * h) + h
first = json.load(open(f"{work}/eager-{dtypes[0]}-1.json"))
seq, batch = first["seq"], first["batch"]
flops_per_token = 6 * params + 12 * L * h * seq
print(f"model {params/1e6:.2f}M params, seq {seq}, batch {batch}, threads {threads}, {rounds} alternating rounds "
      f"(xtrain, eager, compile); transformers attention {first['attn']}, torch {first['torch']}")
print(f"{flops_per_token/1e6:.2f} MFLOP/token (6 x params + 12 x layers x hidden x seq); "
      f"timed steps exclude {warmup} warmup steps and, for torch.compile, the compilation")
for dtype in dtypes:
    tags = [f"{dtype}-{r}" for r in range(1, rounds + 1)]
    xtrain, eager, compiled = [], [], []
    for tag in tags:
        steps = [json.loads(line) for line in open(f"{work}/run-{tag}/metrics.jsonl") if '"loss"' in line]
        xtrain.append(median(s["tokens_per_s"] for s in steps[warmup:]))
        eager.append(json.load(open(f"{work}/eager-{tag}.json")))
        compiled.append(json.load(open(f"{work}/compile-{tag}.json")))
    matmul = median(r["matmul_gflops"] for r in eager + compiled)
    size = eager[0]["matmul_size"]
    env_rates, env_size = [], None
    for tag in tags:
        m = re.search(rf"^{dtype} matmul ([0-9]+)\^3: ([0-9.]+)", open(f"{work}/env-{tag}.txt").read(), re.M)
        if m:
            env_size = m.group(1)
            env_rates.append(float(m.group(2)))
    mfu = lambda tps: tps * flops_per_token / (matmul * 1e9)
    print()
    print(f"{dtype}{' (autocast)' if dtype == 'bf16' else ''}: matmul rate {size}^3 (torch, same threads, "
          f"same invocation) {matmul:.1f} GFLOP/s"
          + (f"; xtrain env {env_size}^3 {median(env_rates):.1f} GFLOP/s" if env_rates else ""))
    print(f"{'engine':<16}{'tokens/s':>10}{'MFU':>8}   per round")
    rows = (("xtrain", xtrain), ("pytorch-eager", [r["tokens_per_s"] for r in eager]),
            ("torch.compile", [r["tokens_per_s"] for r in compiled]))
    for name, values in rows:
        print(f"{name:<16}{median(values):>10.0f}{mfu(median(values)):>8.1%}   {spread(values, '.0f')}")
    compile_s = [r["compile_s"] for r in compiled]
    print(f"torch.compile compile time: {compile_s[0]:.1f} s in round 1 (empty cache)"
          + (f", median {median(compile_s[1:]):.1f} s in round{'s 2-' if rounds > 2 else ' '}{rounds} (cached)"
             if rounds > 1 else ""))
    for name, values in rows[1:]:
        ratios = [x / v for x, v in zip(xtrain, values)]
        print(f"ratio xtrain / {name}: {median(ratios):.3f} (rounds: {spread(ratios, '.3f')})")
    if any(mfu(median(values)) > 1 for _, values in rows):
        print(f"note: MFU above 100% means the {size}^3 {dtype} matmul is not this CPU's peak rate for {dtype} "
              f"(CPUs without native bf16 matrix instructions run bf16 GEMMs on a slow fallback)")
PY

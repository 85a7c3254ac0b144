#!/usr/bin/env bash
# The GRPO demo (recipes/grpo-demo.yaml, docs/post-training.md "Demo recipe"): writes the addition
# prompts and the warm-up's records (fixed seeds) to runs/grpo-demo-data, trains the SFT warm-up
# (the recipe's model as data.objective clm, runs/grpo-demo-sft) and exports it, runs GRPO from
# that export for run.seed 1, 2 and 3 (runs/grpo-demo-seed1..3), and plots the mean reward per
# window of steps, one line per seed, to docs/images/grpo-demo-reward.png, with the figures as a
# table on stdout and in runs/grpo-demo-reward.md. Extra arguments go to the three GRPO runs.
# XTRAIN=PATH runs an xtrain already built instead of building build/xtrain first.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -n ${XTRAIN:-} ]]; then xtrain=$XTRAIN; else bash scripts/build.sh; xtrain=build/xtrain; fi
python=.venv/bin/python3
data=runs/grpo-demo-data
operands=50          # a and b below this
sft_steps=350        # about 45% of the sampled answers right; 300: 19%, 400: 75%
window=20            # steps a point of the curve averages
seeds=(1 2 3)

mkdir -p "$data"
"$python" - "$data" "$operands" <<'PY'
import json, random, sys
out, n = sys.argv[1], int(sys.argv[2])
def additions(seed, count):
    r = random.Random(seed)
    return [(r.randrange(n), r.randrange(n)) for _ in range(count)]
with open(f"{out}/prompts.jsonl", "w") as f:
    for a, b in additions(0, 2000):
        f.write(json.dumps({"prompt": f"{a}+{b}=", "answer": str(a + b)}) + "\n")
with open(f"{out}/sft.jsonl", "w") as f:
    for a, b in additions(1, 20000):
        f.write(json.dumps({"text": f"{a}+{b}={a + b}"}) + "\n")
PY

echo "=== the SFT warm-up: $sft_steps steps of clm on $data/sft.jsonl ==="
rm -rf runs/grpo-demo-sft
"$xtrain" train recipes/grpo-demo.yaml --set name=grpo-demo-sft --set model.init_from= \
  --set data.objective=clm --set data.train="$data/sft.jsonl" --set data.pack=true --set data.seq_len=64 \
  --set train.steps="$sft_steps" --set train.global_batch_size=16 --set train.micro_batch_size=16 \
  --set optim.lr=3e-3 --set optim.warmup_steps=10 --set optim.schedule=constant \
  --set checkpoint.every="$sft_steps" --set checkpoint.keep=1 --set train.log_every=50 --set train.threads=1
"$xtrain" export runs/grpo-demo-sft/checkpoints/latest runs/grpo-demo-sft/export --overwrite

for seed in "${seeds[@]}"; do
  echo "=== GRPO from the warm-up, run.seed $seed ==="
  rm -rf "runs/grpo-demo-seed$seed"
  "$xtrain" train recipes/grpo-demo.yaml --set run.seed="$seed" --set run.dir="runs/grpo-demo-seed$seed" \
    --set train.threads=1 "$@"
done

"$python" -c "import matplotlib" 2>/dev/null ||
  .venv/bin/pip install -q --disable-pip-version-check matplotlib==3.11.2
mkdir -p docs/images
"$python" - "$window" "${seeds[@]}" <<'PY' | tee runs/grpo-demo-reward.md
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
window, seeds = int(sys.argv[1]), [int(s) for s in sys.argv[2:]]
curves = {}
for seed in seeds:
    records = [json.loads(line) for line in open(f"runs/grpo-demo-seed{seed}/metrics.jsonl")]
    rewards = [r["reward"] for r in records if "reward" in r]  # checkpoint lines have none
    curves[seed] = [sum(rewards[i:i + window]) / len(rewards[i:i + window]) for i in range(0, len(rewards), window)]
steps = len(rewards)
# The table: the first window, every fifth after it, and the last; the plot has them all.
shown = sorted({0, *range(4, len(curves[seeds[0]]), 5), len(curves[seeds[0]]) - 1})
print("| run.seed | " + " | ".join(f"steps {i * window + 1}-{(i + 1) * window}" for i in shown) + " |")
print("|---|" + "---|" * len(shown))
for seed, curve in curves.items():
    print(f"| {seed} | " + " | ".join(f"{curve[i]:.3f}" for i in shown) + " |")
for seed, curve in curves.items():
    print(f"run.seed {seed}, windows of {window} steps: " + " ".join(f"{r:.3f}" for r in curve))
fig, ax = plt.subplots(figsize=(6.4, 4))
for seed, curve in curves.items():
    ax.plot([window * (i + 1) for i in range(len(curve))], curve, marker="o", markersize=3, label=f"run.seed {seed}")
ax.set_xlabel(f"GRPO step (each point: the mean of the {window} steps up to it)")
ax.set_ylabel("mean number_match reward")
ax.set_ylim(0, 1)
ax.set_xlim(0, steps)
ax.grid(alpha=0.3)
ax.axhline(0.75, color="gray", linestyle="--", linewidth=1, label="0.75, the stated level")
ax.legend(loc="lower right")
ax.set_title("grpo-demo: the share of a+b= answered right (8 x 8 a step)")
fig.tight_layout()
fig.savefig("docs/images/grpo-demo-reward.png", dpi=100)
PY
echo "plot: docs/images/grpo-demo-reward.png"

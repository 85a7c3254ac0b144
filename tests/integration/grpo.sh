#!/usr/bin/env bash
# data.objective grpo end to end on a tiny random Llama and the byte tokenizer: prompts of short
# additions, 4 completions each, rewarded by a format pattern (a printable first character, about a
# third of a random model's first bytes, so groups differ) with a KL to the frozen reference and two
# passes over each rollout (grpo.iterations 2: the old policy's log-probabilities in play).
# Checks: the rollout and loss metrics are there and finite, the KL is 0 on the first step (the
# policy is the reference) and not after; FSDP 2 trains as one process does (the same completions,
# so the same rewards; losses and gradient norms within 1e-5 relative, weights within 1e-5); a run
# stopped after step 2 and resumed gives the uninterrupted run's losses and weights bit for bit, and
# so does one stopped after step 1, inside the cycle (its checkpoint keeps the rollout), where FSDP 2
# resumed from it trains as one process does; a mixture of experts under expert parallelism 2 trains
# as one process does.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
source "$srcdir/tests/integration/lib/expect.sh"
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work

for a in 3 14 25 7 41 18 9 30 12 5 27 16; do
  b=$(((a * 7) % 23))
  printf '{"prompt": "%d+%d=", "answer": "%d"}\n' "$a" "$b" $((a + b))
done > "$work/prompts.jsonl"

cat > "$work/recipe.yaml" <<YAML
name: grpo-check
run:
  seed: 7
model:
  hidden_size: 64
  num_layers: 2
  num_heads: 4
  num_kv_heads: 2
data:
  train: $work/prompts.jsonl
  objective: grpo
  tokenizer: byte
  seq_len: 24
  shuffle: true
train:
  steps: 4
  global_batch_size: 8
  micro_batch_size: 2
  log_every: 1
  threads: 1
optim:
  lr: 1.0e-2
  warmup_steps: 0
grpo:
  num_generations: 4
  max_new_tokens: 8
  beta: 0.04
  iterations: 2
  rewards: [format, number_match]
  reward:
    format: '^[ -~]'
checkpoint:
  every: 4
YAML

train single 1
train fsdp 2 --set parallel.fsdp=2
"$python" - "$work/single/metrics.jsonl" "$work/fsdp/metrics.jsonl" <<'PY'
import json, math, sys
runs = [[r for r in map(json.loads, open(path)) if "loss" in r] for path in sys.argv[1:]]
single, fsdp = runs
assert [r["step"] for r in single] == [1, 2, 3, 4], single
names = ["loss", "reward", "reward_std", "frac_reward_zero_std", "kl", "clip_ratio/region_mean",
         "rewards/format/mean", "rewards/number_match/mean", "completions/mean_length", "rollout/tokens_per_s"]
for r in single:
    for name in names:
        assert name in r and math.isfinite(r[name]), (name, r)
assert single[0]["kl"] == 0 and single[0]["clip_ratio/region_mean"] == 0, single[0]
assert single[1]["kl"] > 0 and single[3]["kl"] > 0, single
assert any(r["reward_std"] > 0 for r in single), single
for a, b in zip(single, fsdp):
    for name in ["reward", "reward_std", "completions/mean_length"]:  # the same completions
        assert a[name] == b[name], (name, a, b)
# Step 1 is on policy with completions of equal length: its loss is 0 up to rounding, so only
# its gradient norm is compared here (relative), and the losses from step 2 by compare_runs.
assert abs(single[0]["grad_norm"] - fsdp[0]["grad_norm"]) <= 1e-5 * single[0]["grad_norm"], (single[0], fsdp[0])
print("grpo: losses", [r["loss"] for r in single], "rewards", [r["reward"] for r in single],
      "kl", [r["kl"] for r in single])
PY
compare_runs "$work/single" "$work/fsdp" 2

# Stopped after step 2 (a rollout's last step) and resumed: the losses and weights, bit for bit.
train resumed 1 --stop-at-step 2 --set checkpoint.every=1
train resumed 1 --set checkpoint.every=1
"$python" - "$work/single/metrics.jsonl" "$work/resumed/metrics.jsonl" <<'PY'
import json, sys
losses = [{r["step"]: r["loss"] for r in map(json.loads, open(path)) if "loss" in r} for path in sys.argv[1:]]
assert losses[0] == losses[1], losses
PY
cmp "$work/single/checkpoints/step-4/model.safetensors" "$work/resumed/checkpoints/step-4/model.safetensors"

# Stopped after step 1, inside the cycle of two steps on one rollout: the checkpoint keeps the
# rollout (step 2's has none to keep), and the resumed run trains step 2 on it, bit for bit; the
# same checkpoint resumed under FSDP 2 trains as the one process did (within 1e-5).
train midcycle 1 --stop-at-step 1 --set checkpoint.every=1
[[ -f $work/midcycle/checkpoints/step-1/grpo_rollout.safetensors ]] || fail "step 1's checkpoint kept no rollout"
cp -r "$work/midcycle" "$work/midcycle-fsdp"
train midcycle 1 --set checkpoint.every=1
[[ ! -e $work/midcycle/checkpoints/step-2/grpo_rollout.safetensors ]] || fail "step 2 ends its cycle, yet kept a rollout"
[[ -f $work/midcycle/checkpoints/step-3/grpo_rollout.safetensors ]] || fail "step 3's checkpoint kept no rollout"
! grep -n "sampled again" "$work/midcycle.log" || fail "the resumed run sampled step 2's rollout again"
"$python" - "$work/single/metrics.jsonl" "$work/midcycle/metrics.jsonl" <<'PY'
import json, sys
losses = [{r["step"]: (r["loss"], r["grad_norm"], r["kl"]) for r in map(json.loads, open(path)) if "loss" in r}
          for path in sys.argv[1:]]
assert losses[0] == losses[1], losses
PY
cmp "$work/single/checkpoints/step-4/model.safetensors" "$work/midcycle/checkpoints/step-4/model.safetensors"
# FSDP 2 stopped inside the next cycle (after step 3): its ranks' rows join in one kept rollout,
# which FSDP 2 and one process each resume from.
train midcycle-fsdp 2 --set parallel.fsdp=2 --set checkpoint.every=1 --stop-at-step 3
cp -r "$work/midcycle-fsdp" "$work/fsdp-to-one"
train midcycle-fsdp 2 --set parallel.fsdp=2 --set checkpoint.every=1
compare_runs "$work/single" "$work/midcycle-fsdp" 2
train fsdp-to-one 1 --set checkpoint.every=1
compare_runs "$work/single" "$work/fsdp-to-one" 4
for log in midcycle-fsdp fsdp-to-one; do
  ! grep -n "sampled again" "$work/$log.log" || fail "$log sampled its rollout again"
done
# A mixture of experts (Qwen3-MoE: 4 experts, 2 a token, the first layer dense) with its experts
# split over expert parallelism 2: the rollouts' sampling forwards dispatch tokens between the
# ranks, and the run trains as one process does.
moe=(--set model.family=qwen3_moe --set model.num_experts=4 --set model.num_experts_per_tok=2
     --set model.moe_intermediate_size=48 --set model.first_k_dense=1 --set model.router_aux_loss_coef=0.01)
train moe_single 1 "${moe[@]}"
train moe_ep2 2 "${moe[@]}" --set parallel.ep=2
grep -q "experts split over ep 2" "$work/moe_ep2.log" || fail "moe_ep2 did not split its experts"
compare_runs "$work/moe_single" "$work/moe_ep2" 2 1e-5
echo "grpo: fsdp 2 = one process, resumed = uninterrupted (at a cycle's end and inside one, on one process and FSDP 2), ep 2 = one process"

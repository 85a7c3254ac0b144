#!/usr/bin/env python3
"""TRL's GRPOTrainer as the reference of xtrain's GRPO loss and advantages (lib/train/grpo_loss.h,
tests/unit/train/grpo_loss_test.cpp).

    grpo_trl.py --inputs IN.safetensors --out OUT.safetensors --num-generations G
                --max-completion-length L --case LOSS:BETA:EPS:EPS_HIGH:LEVEL:SCALE:KL_TIMES_RATIO:OLD:MICRO ...

IN holds logps, old_logps, ref_logps, mask [B, T] (the mask a prefix of ones a row, at least one)
and rewards [B]. Each case runs through TRL's own code on a GRPOTrainer built from a GRPOConfig
with the case's loss_type, epsilon, epsilon_high, importance_sampling_level, scale_rewards,
use_bias_correction_kl, num_generations G, max_completion_length L and MICRO accumulation steps
(steps_per_generation the same), around a tiny random Llama whose weights play no part:
  - _generate_and_score_completions scores the batch: a rollout_func hands over completions of
    the mask's lengths and a reward function the given rewards, and TRL computes the advantages,
    num_items_in_batch and its reward metrics;
  - _compute_loss takes each of TRL's micro batches in turn (split_tensor_dict, unshuffled), as
    its gradient accumulation does, with the per-token log-probabilities the policy would give
    replaced by rows of one leaf tensor, whose .grad is then the gradient of the step's loss with
    respect to them; old_per_token_logps are the given ones where OLD is 1 (else TRL takes the
    policy's, detached), ref_per_token_logps the given ones.
The trainer is built with beta 0 and given BETA afterwards: with a beta it would build a
reference model from a model path, and the reference's log-probabilities are given here.
Writes for case c: advantages.c, loss.c (the sum of the micro batches' losses, float64), grad.c
[B, T], and metric.c.NAME, TRL's logged metric NAME (per micro batch for the loss's metrics).
"""
import argparse
import os
import tempfile

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import torch
from safetensors.torch import load_file, save_file

LOSS_METRICS = ["clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean", "clip_ratio/low_min",
                "clip_ratio/high_max"]
REWARD_METRICS = ["reward", "reward_std", "frac_reward_zero_std"]
WORDS = ["<unk>", "<eos>", "a", "b", "c", "d", "e", "f", "g", "h"]


def tiny_tokenizer():
    import transformers
    from tokenizers import Tokenizer, models
    vocab = {word: i for i, word in enumerate(WORDS)}
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<unk>")), eos_token="<eos>", pad_token="<eos>",
        unk_token="<unk>")


def tiny_model():  # a fresh one a trainer: GRPOTrainer patches its model's forward
    import transformers
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=len(WORDS), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                                      bos_token_id=1, eos_token_id=1, pad_token_id=1)
    return transformers.LlamaForCausalLM(config).float()


def given_reward(prompts, completions, reward, **kwargs):
    return list(reward)


def run_case(index, spec, inputs, args, tokenizer, out):
    import datasets
    from trl import GRPOConfig, GRPOTrainer
    from trl.trainer.utils import split_tensor_dict
    loss_type, beta, eps, eps_high, level, scale, kl_times_ratio, old, micro = spec.split(":")
    beta, micro = float(beta), int(micro)
    mask = inputs["mask"]
    rows = mask.size(0)
    lengths = [int(n) for n in mask.sum(-1).tolist()]

    def rollout(prompts, trainer):  # the completions: lengths as the mask, tokens other than EOS
        return {"prompt_ids": [[2, 3] for _ in prompts],
                "completion_ids": [[2 + (i + j) % 8 for j in range(n)] for i, n in enumerate(lengths)],
                "logprobs": [[0.0] * n for n in lengths]}

    config = GRPOConfig(output_dir=tempfile.mkdtemp(), loss_type=loss_type, beta=0.0, epsilon=float(eps),
                        epsilon_high=float(eps_high), importance_sampling_level=level, scale_rewards=scale,
                        use_bias_correction_kl=kl_times_ratio == "1", num_generations=args.num_generations,
                        max_completion_length=args.max_completion_length, per_device_train_batch_size=rows // micro,
                        gradient_accumulation_steps=micro, report_to="none", use_cpu=True, bf16=False, fp16=False)
    examples = [{"prompt": f"prompt {i // args.num_generations}", "reward": float(r)}
                for i, r in enumerate(inputs["rewards"].tolist())]
    trainer = GRPOTrainer(model=tiny_model(), reward_funcs=given_reward, args=config,
                          train_dataset=datasets.Dataset.from_list(examples), processing_class=tokenizer,
                          rollout_func=rollout)
    trainer.model.train()
    batch = trainer._generate_and_score_completions(examples)
    assert torch.equal(batch["completion_mask"].float(), mask.float()), "TRL's completion mask is not the given one"
    trainer.beta = beta
    if old == "1":
        batch["old_per_token_logps"] = inputs["old_logps"]
    batch["ref_per_token_logps"] = inputs["ref_logps"]

    policy = inputs["logps"].clone().requires_grad_(True)
    current = {}

    def given_logps(model, input_ids, attention_mask, logits_to_keep, **kwargs):
        assert logits_to_keep == policy.size(1)
        part = policy[current["rows"]]
        return part, torch.zeros_like(part.detach()), None

    trainer._get_per_token_logps_and_entropies = given_logps
    trainer.current_gradient_accumulation_steps = micro
    names = (["kl"] if beta != 0 else []) + LOSS_METRICS
    metrics = {name: [] for name in names}
    total = 0.0
    for k, part in enumerate(split_tensor_dict(batch, micro)):
        current["rows"] = slice(k * (rows // micro), (k + 1) * (rows // micro))
        loss = trainer._compute_loss(trainer.model, part)
        loss.backward()
        total += loss.item()
        for name in names:
            metrics[name].append(trainer._metrics["train"][name][-1])
    out[f"advantages.{index}"] = batch["advantages"].detach().float().contiguous()
    out[f"loss.{index}"] = torch.tensor([total], dtype=torch.float64)
    out[f"grad.{index}"] = policy.grad.contiguous()
    for name in names:
        out[f"metric.{index}.{name}"] = torch.tensor(metrics[name], dtype=torch.float64)
    for name in REWARD_METRICS:
        out[f"metric.{index}.{name}"] = torch.tensor([trainer._metrics["train"][name][-1]], dtype=torch.float64)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--num-generations", type=int, required=True)
    parser.add_argument("--max-completion-length", type=int, required=True)
    parser.add_argument("--case", action="append", required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    inputs = load_file(args.inputs)
    tokenizer = tiny_tokenizer()
    out = {}
    for index, spec in enumerate(args.case):
        run_case(index, spec, inputs, args, tokenizer, out)
    save_file(out, args.out)


if __name__ == "__main__":
    main()

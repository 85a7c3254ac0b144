#!/usr/bin/env python3
"""transformers' own generate() as the reference for xtrain's rollout sampler
(train/rollout_sampler.h).

    rollout_hf.py golden --family qwen3 --out DIR --golden OUT.safetensors [--new-tokens 32]
        A small random causal LM (hf_random_model.py's shape, its weights scaled up so that
        greedy choices are not near ties) written with save_pretrained to DIR, prompts of
        different lengths, and transformers' greedy completions of them in one left-padded
        batch: generate(do_sample=False) with the attention mask, no EOS. OUT holds "prompts"
        (int64 [B, L], left-padded with 0), "lengths" [B], "completions" [B, new] and "margin",
        the smallest gap between the best and second-best logit over every greedy choice.
    rollout_hf.py bench-model --out DIR [--vocab V --hidden H --layers N --heads A --kv-heads K]
        A random Llama of that shape in bf16-free fp32, for scripts/bench/rollout.sh.
    rollout_hf.py bench --model DIR --batch B --prompt-tokens P --new-tokens N --threads T [--seed S]
        Times generate(do_sample=True) (temperature 1, no top-k, every completion runs to N) on
        B prompts of P random ids with T torch threads, after one warm-up, and prints
        "transformers: TOKENS tokens in SECONDS s".
"""
import argparse
import os
import sys
import time

import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def golden(args):
    import hf_random_model
    torch.set_num_threads(1)
    model = hf_random_model.build(args.family, args.seed).float().eval()
    with torch.no_grad():
        for _, parameter in model.named_parameters():
            if parameter.dim() == 1:
                parameter.add_(torch.randn_like(parameter) * 0.1)
            else:  # init_std 0.02 leaves every logit within a hair of the others
                parameter.mul_(8.0)
    model.save_pretrained(args.out, safe_serialization=True)
    generator = torch.Generator().manual_seed(args.seed + 1)
    lengths = [5, 11, 1, 8, 3]
    longest = max(lengths)
    vocab = model.config.vocab_size
    prompts = torch.zeros(len(lengths), longest, dtype=torch.long)
    mask = torch.zeros(len(lengths), longest, dtype=torch.long)
    for row, length in enumerate(lengths):
        prompts[row, longest - length:] = torch.randint(1, vocab, (length,), generator=generator)
        mask[row, longest - length:] = 1
    with torch.no_grad():
        out = model.generate(input_ids=prompts, attention_mask=mask, do_sample=False, max_new_tokens=args.new_tokens,
                             min_new_tokens=args.new_tokens, eos_token_id=None, pad_token_id=0,
                             output_scores=True, return_dict_in_generate=True)
    scores = torch.stack(out.scores, 1)  # [B, new, vocab]
    top = scores.topk(2, -1).values
    margin = (top[..., 0] - top[..., 1]).min()
    save_file({"prompts": prompts, "lengths": torch.tensor(lengths), "completions": out.sequences[:, longest:].contiguous(),
               "margin": margin.reshape(1)}, args.golden)


def bench_model(args):
    import transformers
    torch.manual_seed(5)
    config = transformers.LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.hidden * 8 // 3,
                                      num_hidden_layers=args.layers, num_attention_heads=args.heads,
                                      num_key_value_heads=args.kv_heads, max_position_embeddings=1024,
                                      tie_word_embeddings=False)
    transformers.LlamaForCausalLM(config).float().save_pretrained(args.out, safe_serialization=True)


def bench(args):
    import transformers
    torch.set_num_threads(args.threads)
    transformers.utils.logging.disable_progress_bar()
    model = transformers.AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    generator = torch.Generator().manual_seed(args.seed)
    prompts = torch.randint(1, model.config.vocab_size, (args.batch, args.prompt_tokens), generator=generator)
    kwargs = dict(attention_mask=torch.ones_like(prompts), do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                  max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, eos_token_id=None, pad_token_id=0)
    with torch.no_grad():
        model.generate(input_ids=prompts[:, :8], **dict(kwargs, max_new_tokens=4, min_new_tokens=4))  # warm-up
        start = time.perf_counter()
        out = model.generate(input_ids=prompts, **kwargs)
        seconds = time.perf_counter() - start
    tokens = (out.shape[1] - args.prompt_tokens) * args.batch
    print(f"transformers: {tokens} tokens in {seconds:.3f} s")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("golden")
    g.add_argument("--family", choices=["llama", "qwen2", "qwen3", "qwen3_moe", "mixtral"], required=True)
    g.add_argument("--out", required=True)
    g.add_argument("--golden", required=True)
    g.add_argument("--new-tokens", type=int, default=32)
    g.add_argument("--seed", type=int, default=7)
    m = sub.add_parser("bench-model")
    m.add_argument("--out", required=True)
    m.add_argument("--vocab", type=int, default=32000)
    m.add_argument("--hidden", type=int, default=512)
    m.add_argument("--layers", type=int, default=8)
    m.add_argument("--heads", type=int, default=8)
    m.add_argument("--kv-heads", type=int, default=4)
    b = sub.add_parser("bench")
    b.add_argument("--model", required=True)
    b.add_argument("--batch", type=int, required=True)
    b.add_argument("--prompt-tokens", type=int, required=True)
    b.add_argument("--new-tokens", type=int, required=True)
    b.add_argument("--threads", type=int, required=True)
    b.add_argument("--seed", type=int, default=3)
    args = p.parse_args()
    {"golden": golden, "bench-model": bench_model, "bench": bench}[args.command](args)


if __name__ == "__main__":
    main()

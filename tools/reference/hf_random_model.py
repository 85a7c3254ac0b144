#!/usr/bin/env python3
"""Writes a small random Hugging Face causal LM with `save_pretrained`, sharded into several
safetensors files with a model.safetensors.index.json, and the logits it computes for given
tokens, so that xtrain's loader of Hugging Face folders can be checked against the library that
wrote them. Mixtures of experts are written as transformers stores them, each expert's
projections apart.

Usage:
    hf_random_model.py --family qwen3 --out DIR --tokens TOKENS.safetensors --logits OUT.safetensors
"""
import argparse

import torch
from safetensors.torch import load_file, save_file


def build(family, seed):
    import transformers
    torch.manual_seed(seed)
    shape = dict(vocab_size=97, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                 tie_word_embeddings=False)
    if family == "qwen3":
        config = transformers.Qwen3Config(head_dim=8, **shape)
        return transformers.Qwen3ForCausalLM(config)
    if family == "qwen2":
        return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**shape))
    if family == "qwen3_moe":  # layer 0 dense, layer 1 of 4 experts, 2 per token
        config = transformers.Qwen3MoeConfig(head_dim=8, num_experts=4, num_experts_per_tok=2,
                                             moe_intermediate_size=48, mlp_only_layers=[0], **shape)
        return transformers.Qwen3MoeForCausalLM(config)
    if family == "mixtral":  # every layer of 4 experts of width intermediate_size, 2 per token
        shape["intermediate_size"] = 48
        config = transformers.MixtralConfig(num_local_experts=4, num_experts_per_tok=2, **shape)
        return transformers.MixtralForCausalLM(config)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**shape))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--family", choices=["llama", "qwen2", "qwen3", "qwen3_moe", "mixtral"], required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--tokens", required=True)
    p.add_argument("--logits", required=True)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args()
    torch.set_num_threads(1)
    model = build(args.family, args.seed).float().eval()
    # Biases and norm gains start at 0 and 1: give them values, so the comparison covers them.
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.dim() == 1:
                parameter.add_(torch.randn_like(parameter) * 0.1)
    model.save_pretrained(args.out, max_shard_size="100KB", safe_serialization=True)
    tokens = load_file(args.tokens)["input_ids"].long()
    with torch.no_grad():
        logits = model(input_ids=tokens, use_cache=False).logits
    save_file({"logits": logits.contiguous()}, args.logits)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A Hugging Face model folder as transformers writes and reads it, for checking
`model.init_from: hf:DIR` and `xtrain export` against the library users trust.

    hf_folder.py make --family qwen3 --tokenizer TOKENIZER.json --out DIR [--rope-theta T]
                      [--llama3-scaling]
        A small random model whose vocabulary is the tokenizer's plus 4 padding ids (rotary base
        1e6 unless given; --llama3-scaling adds Llama 3's rope scaling), written
        with save_pretrained in several safetensors files and an index, with the tokenizer
        (tokenizer.json, and a tokenizer_config.json naming <|endoftext|> as its EOS).
    hf_folder.py eval-loss --model DIR --data EVAL.jsonl --seq-len N
        Loads DIR with AutoTokenizer and AutoModelForCausalLM and prints the mean next-token
        loss over the eval set the way xtrain cuts it: each record's "text" tokenized without
        special tokens and followed by EOS, the stream cut into windows of N + 1 tokens
        (inputs [:-1], targets [1:]), the last partial window dropped.
"""
import argparse
import json
import os
import shutil

import torch


def make(args):
    import transformers
    from tokenizers import Tokenizer

    vocab = Tokenizer.from_file(args.tokenizer).get_vocab_size(with_added_tokens=True) + 4
    torch.manual_seed(args.seed)
    rope = dict(rope_type="default", rope_theta=args.rope_theta)
    if args.llama3_scaling:  # short wavelengths kept, long ones stretched 8 times, the middle blended
        rope.update(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                    original_max_position_embeddings=16)
    shape = dict(vocab_size=vocab, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                 tie_word_embeddings=False, rms_norm_eps=1e-6, rope_parameters=rope)
    if args.family == "qwen3":
        model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(head_dim=8, **shape))
    elif args.family == "qwen2":
        model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**shape))
    elif args.family == "qwen3_moe":  # layer 0 dense, layer 1 of 4 experts, 2 per token
        model = transformers.Qwen3MoeForCausalLM(transformers.Qwen3MoeConfig(
            head_dim=8, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=48, mlp_only_layers=[0],
            **shape))
    elif args.family == "deepseek_v3":  # latent attention under YaRN; layer 0 dense, layer 1 of 4 experts
        rope = dict(rope_type="yarn", rope_theta=args.rope_theta, factor=4.0, original_max_position_embeddings=32,
                    beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=0.8)
        shape.update(num_key_value_heads=4, rope_parameters=rope)
        model = transformers.DeepseekV3ForCausalLM(transformers.DeepseekV3Config(
            q_lora_rank=24, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=12,
            n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=48, n_shared_experts=1, n_group=2,
            topk_group=1, routed_scaling_factor=2.5, first_k_dense_replace=1, **shape))
        with torch.no_grad():  # the expert bias, a buffer, starts at 0; the router weight too
            for name, buffer in model.named_buffers():
                if name.endswith("e_score_correction_bias"):
                    buffer.copy_(torch.randn_like(buffer) * 0.05)
            for name, parameter in model.named_parameters():
                if name.endswith("mlp.gate.weight"):
                    parameter.copy_(torch.randn_like(parameter) * 0.02)
    elif args.family == "gpt_oss":  # sliding window of 8 then full, sinks, YaRN; 4 biased experts a layer
        rope = dict(rope_type="yarn", rope_theta=args.rope_theta, factor=4.0, original_max_position_embeddings=32,
                    beta_fast=32.0, beta_slow=1.0, truncate=False)
        shape.update(rope_parameters=rope, intermediate_size=48)
        model = transformers.GptOssForCausalLM(transformers.GptOssConfig(
            head_dim=16, num_local_experts=4, num_experts_per_tok=2, sliding_window=8, swiglu_limit=1.0,
            layer_types=["sliding_attention", "full_attention"], **shape))
        with torch.no_grad():  # sinks and the router start at 0 or small values
            for name, parameter in model.named_parameters():
                if name.endswith("sinks") or name.endswith("router.weight"):
                    parameter.copy_(torch.randn_like(parameter) * (1.0 if name.endswith("sinks") else 0.05))
                elif name.endswith("_bias"):
                    parameter.copy_(torch.randn_like(parameter) * 0.05)
    else:
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**shape))
    # Biases and norm gains start at 0 and 1: give them values, so the check covers them.
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 1:
                parameter.add_(torch.randn_like(parameter) * 0.1)
    model.float().save_pretrained(args.out, max_shard_size="200KB", safe_serialization=True)
    shutil.copy(args.tokenizer, os.path.join(args.out, "tokenizer.json"))
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>"}, f)
    files = sorted(n for n in os.listdir(args.out) if n.endswith(".safetensors"))
    print(f"{args.out}: {sum(p.numel() for p in model.parameters())} parameters in {len(files)} files, "
          f"vocab {vocab}")


def eval_loss(args):
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(args.model)
    model = transformers.AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    stream = []
    with open(args.data) as f:
        for line in f:
            if line.strip():
                stream += tokenizer(json.loads(line)["text"], add_special_tokens=False)["input_ids"]
                stream.append(tokenizer.eos_token_id)
    window = args.seq_len + 1
    count = len(stream) // window
    tokens = torch.tensor(stream[:count * window]).view(count, window)
    total, targets = 0.0, 0
    with torch.no_grad():
        for batch in tokens.split(8):
            logits = model(input_ids=batch[:, :-1], use_cache=False).logits
            total += torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.size(-1)).double(), batch[:, 1:].reshape(-1), reduction="sum").item()
            targets += batch[:, 1:].numel()
    print(f"{total / targets:.10f} {targets}")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("--family", choices=["llama", "qwen2", "qwen3", "qwen3_moe", "deepseek_v3", "gpt_oss"], required=True)
    m.add_argument("--tokenizer", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--seed", type=int, default=11)
    m.add_argument("--rope-theta", type=float, default=1e6)
    m.add_argument("--llama3-scaling", action="store_true")
    e = sub.add_parser("eval-loss")
    e.add_argument("--model", required=True)
    e.add_argument("--data", required=True)
    e.add_argument("--seq-len", type=int, required=True)
    args = p.parse_args()
    torch.set_num_threads(1)
    import transformers
    transformers.utils.logging.disable_progress_bar()
    make(args) if args.command == "make" else eval_loss(args)


if __name__ == "__main__":
    main()

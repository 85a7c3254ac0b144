#!/usr/bin/env python3
"""LoRA against PEFT, for tests/integration/lora.sh.

    lora_peft.py make --data-dir DIR --model FAMILY:OUT [--model FAMILY:OUT ...]
        For each FAMILY (llama, qwen2, qwen3, qwen3_moe, mixtral or gpt_oss) a small random model
        (vocabulary of xtrain's byte tokenizer, 257 ids, EOS 256; qwen2's q, k and v biases and
        qwen3's q and k norms given values) written with save_pretrained into OUT, and train.jsonl / eval.jsonl of short
        English records in DIR.
    lora_peft.py check --data EVAL.jsonl --seq-len N --rank R --alpha A --targets a,b
                       --case NAME:BASE:ADAPTER:MERGED:LOSS[:TARGETS] [--case ...]
        For each case loads ADAPTER with peft.PeftModel.from_pretrained onto the transformers
        model BASE and prints its eval loss over EVAL.jsonl cut as xtrain cuts it (each
        record's UTF-8 bytes and EOS, windows of N + 1 tokens, the last partial one dropped),
        against xtrain's LOSS, and the largest difference between PEFT's logits and those of
        the merged export MERGED loaded by transformers (TARGETS: the case's own a,b instead of
        --targets). Fails beyond 1e-5, when an adapter's B
        is still zero, or when adapter_config.json does not say what the run trained.
"""
import argparse
import json
import os

import torch

EOS = 256


def make(args):
    for model in args.model:
        family, out = model.split(":", 1)
        make_model(family, out)
    write_data(args.data_dir)


def make_model(family, out):
    import transformers
    torch.manual_seed(7)
    shape = dict(vocab_size=EOS + 1, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                 tie_word_embeddings=False, bos_token_id=EOS, eos_token_id=EOS)
    if family == "qwen2":
        model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**shape))
    elif family == "qwen3":
        model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(head_dim=16, **shape))
    elif family == "qwen3_moe":  # the first layer dense, the second 4 experts of width 48
        model = transformers.Qwen3MoeForCausalLM(transformers.Qwen3MoeConfig(
            head_dim=16, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=48, mlp_only_layers=[0],
            **shape))
    elif family == "gpt_oss":  # sinks, a sliding window of 8 then full attention; 4 biased experts a layer
        model = transformers.GptOssForCausalLM(transformers.GptOssConfig(
            head_dim=16, num_local_experts=4, num_experts_per_tok=2, sliding_window=8, swiglu_limit=1.0,
            layer_types=["sliding_attention", "full_attention"], **{**shape, "intermediate_size": 48}))
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("sinks") or name.endswith("router.weight") or name.endswith("_bias"):
                    p.copy_(torch.randn_like(p) * (1.0 if name.endswith("sinks") else 0.05))
    elif family == "mixtral":  # every layer 4 experts
        model = transformers.MixtralForCausalLM(transformers.MixtralConfig(
            num_local_experts=4, num_experts_per_tok=2, **{**shape, "intermediate_size": 48}))
    else:
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**shape))
    model = model.float()
    with torch.no_grad():  # norm gains start at 1 and biases at 0: give them values
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
    model.save_pretrained(out)


def write_data(data_dir):
    words = ("the cat sat on a mat while the dog ran to the park and a bird sang in the old tree near "
             "the river where children played all day long until the sun went down").split()
    g = torch.Generator().manual_seed(3)
    for name, count in (("train", 96), ("eval", 16)):
        with open(os.path.join(data_dir, f"{name}.jsonl"), "w") as f:
            for _ in range(count):
                picks = torch.randint(len(words), (24,), generator=g).tolist()
                f.write(json.dumps({"text": " ".join(words[i] for i in picks) + "."}) + "\n")


def eval_windows(path, seq_len):
    stream = []
    for line in open(path):
        if line.strip():
            stream += list(json.loads(line)["text"].encode("utf-8")) + [EOS]
    window = seq_len + 1
    count = len(stream) // window
    return torch.tensor(stream[:count * window]).view(count, window)


def check(args):
    for case in args.case:
        name, base, adapter, merged, loss, *targets = case.split(":")
        check_case(args, name, base, adapter, merged, float(loss), targets[0] if targets else args.targets)


def check_case(args, name, base_dir, adapter, merged_dir, xtrain_loss, targets):
    import peft
    import transformers
    from safetensors.torch import load_file
    config = json.load(open(os.path.join(adapter, "adapter_config.json")))
    want = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": args.rank, "lora_alpha": args.alpha,
            "lora_dropout": 0.0, "target_modules": targets.split(",")}
    wrong = {k: (config.get(k), v) for k, v in want.items() if config.get(k) != v}
    assert not wrong, f"adapter_config.json: {wrong}"
    tensors = load_file(os.path.join(adapter, "adapter_model.safetensors"))
    example = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"
    assert example in tensors, sorted(tensors)[:4]
    zero_b = [n for n, t in tensors.items() if "lora_B" in n and not t.abs().max() > 0]
    assert not zero_b, f"adapters whose B is still zero: {zero_b}"
    base = transformers.AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    model = peft.PeftModel.from_pretrained(base, adapter).eval()
    merged = transformers.AutoModelForCausalLM.from_pretrained(merged_dir, dtype=torch.float32).eval()
    tokens = eval_windows(args.data, args.seq_len)
    total, targets, logit_difference = 0.0, 0, 0.0
    with torch.no_grad():
        for batch in tokens.split(8):
            logits = model(input_ids=batch[:, :-1]).logits
            merged_logits = merged(input_ids=batch[:, :-1], use_cache=False).logits
            logit_difference = max(logit_difference, (logits - merged_logits).abs().max().item())
            total += torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)).double(),
                                                       batch[:, 1:].reshape(-1), reduction="sum").item()
            targets += batch[:, 1:].numel()
    loss = total / targets
    print(f"lora ({name}): {len(tensors)} adapter tensors loaded by peft {peft.__version__}; eval loss {loss:.8f} vs "
          f"xtrain {xtrain_loss:.8f} (difference {abs(loss - xtrain_loss):.2e}); PEFT's logits vs the merged "
          f"export's in transformers: max difference {logit_difference:.2e}")
    assert abs(loss - xtrain_loss) <= 1e-5, loss
    assert logit_difference <= 1e-5, logit_difference


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("--data-dir", required=True)
    m.add_argument("--model", action="append", required=True)
    c = sub.add_parser("check")
    for name in ("--data", "--targets"):
        c.add_argument(name, required=True)
    c.add_argument("--case", action="append", required=True)
    c.add_argument("--seq-len", type=int, required=True)
    c.add_argument("--rank", type=int, required=True)
    c.add_argument("--alpha", type=float, required=True)
    args = p.parse_args()
    torch.set_num_threads(1)
    import transformers
    transformers.utils.logging.disable_progress_bar()
    {"make": make, "check": check}[args.command](args)


if __name__ == "__main__":
    main()

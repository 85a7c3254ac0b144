#!/usr/bin/env python3
"""LoRA against PEFT, for tests/integration/lora.sh.

    lora_peft.py make --data-dir DIR --model FAMILY:OUT [--model FAMILY:OUT ...]
        For each FAMILY (llama, qwen2, qwen3, qwen3_moe, mixtral, gpt_oss or deepseek_v3) a small random model
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
    lora_peft.py dropout-check --base BASE --adapter ADAPTER --data TRAIN.jsonl --seq-len N
                               --metrics METRICS.jsonl --step K --seed S
        LoRA dropout: loads ADAPTER (the export of a run's checkpoint at step K - 1, trained with
        model.lora.dropout p, which adapter_config.json names) onto BASE in training mode, gives
        each adapter's dropout the masks xtrain keys (model/layers/keyed_dropout.h, written here
        again: run.seed S, step K, the decoder layer, the module's name, each token's sample and
        position and each feature) and computes step K's loss over TRAIN.jsonl's windows (all of
        them: the data is one global batch, read in order, data.shuffle false, so that step K
        reads window w as the global sample (K - 1) x windows + w) and the adapters' gradient
        norm, against METRICS' step K. Fails beyond 1e-5 (relative), and when the masks drop nothing.
"""
import argparse
import json
import math
import os

import torch

EOS = 256


def make(args):
    for model in args.model:
        family, out = model.split(":", 1)
        make_model(family, out)
    write_data(args.data_dir)
    write_dropout_data(args.data_dir)


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
    elif family == "deepseek_v3":  # latent attention with a query bottleneck; layer 0 dense, layer 1 of 4 experts
        model = transformers.DeepseekV3ForCausalLM(transformers.DeepseekV3Config(
            q_lora_rank=24, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=12,
            n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=48, n_shared_experts=1, n_group=2,
            topk_group=1, routed_scaling_factor=2.5, first_k_dense_replace=1, **{**shape, "num_key_value_heads": 4}))
        with torch.no_grad():  # the router weight starts at 0
            for name, p in model.named_parameters():
                if name.endswith("mlp.gate.weight"):
                    p.copy_(torch.randn_like(p) * 0.02)
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


def write_dropout_data(data_dir, seq_len=32, windows=8):
    """Exactly `windows` training windows of seq_len + 1 tokens: one record of seq_len bytes each."""
    words = "a bird sang in the old tree near the river while the cat sat on a mat".split()
    g = torch.Generator().manual_seed(5)
    with open(os.path.join(data_dir, "dropout.jsonl"), "w") as f:
        for _ in range(windows):
            text = ""
            while len(text) < seq_len:
                text += words[torch.randint(len(words), (1,), generator=g).item()] + " "
            f.write(json.dumps({"text": text[:seq_len]}) + "\n")


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
    example = f"base_model.model.model.layers.0.self_attn.{targets.split(',')[0]}.lora_A.weight"
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


MASK32, MASK64 = 0xFFFFFFFF, (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def mix(x):  # int64 tensor of values below 2^32, two rounds of xorshift-multiply
    for _ in range(2):
        x = x ^ (x >> 16)
        x = (x * 0x7FEB352D) & MASK32
        x = x ^ (x >> 15)
        x = (x * 0x1B873593) & MASK32
        x = x ^ (x >> 16)
    return x


def adapter_site(module):  # 2^32 + FNV-1a of the module's name
    h = 2166136261
    for byte in module.encode():
        h = ((h ^ byte) * 16777619) & MASK32
    return (1 << 32) + h


def keep_mask(tokens, seed, step, layer, site, features, p):
    """xtrain's hidden_keep_mask: bool [B, T, features] for int64 token identities [B, T]."""
    h = splitmix64(seed)
    for part in (step, layer, site):
        h = splitmix64(h ^ (part & MASK64))
    key = h & MASK32
    low, high = tokens & MASK32, (tokens >> 32) & MASK32
    token = mix(mix(low ^ key) ^ high).unsqueeze(-1)
    return mix(token ^ torch.arange(features)) >= math.floor(p * 4294967296.0 + 0.5)


class KeyedDropout(torch.nn.Module):
    """Dropout with the masks xtrain draws for one adapter, for the rows of `tokens`."""

    def __init__(self, p, seed, step, layer, module, tokens):
        super().__init__()
        self.p, self.seed, self.step, self.layer, self.site, self.tokens = p, seed, step, layer, adapter_site(module), tokens
        self.dropped = 0

    def forward(self, x):
        if not self.training:
            return x
        keep = keep_mask(self.tokens, self.seed, self.step, self.layer, self.site, x.size(-1), self.p)
        self.dropped += int((~keep).sum())
        return x * keep.to(x.dtype) * (1.0 / (1.0 - self.p))


def dropout_check(args):
    import peft
    import transformers
    from peft.tuners.lora import LoraLayer
    config = json.load(open(os.path.join(args.adapter, "adapter_config.json")))
    p = config["lora_dropout"]
    assert p > 0, f"adapter_config.json: lora_dropout {p}"
    record = next(r for r in map(json.loads, open(args.metrics)) if r.get("step") == args.step and "loss" in r)
    base = transformers.AutoModelForCausalLM.from_pretrained(args.base, dtype=torch.float32)
    model = peft.PeftModel.from_pretrained(base, args.adapter, is_trainable=True).train()
    windows = eval_windows(args.data, args.seq_len)
    inputs, labels = windows[:, :-1], windows[:, 1:]
    samples = (args.step - 1) * windows.size(0) + torch.arange(windows.size(0))
    tokens = samples.view(-1, 1) * args.seq_len + torch.arange(args.seq_len)
    droppers = []
    for name, module in model.named_modules():
        if isinstance(module, LoraLayer):
            layer = int(name.split("layers.")[1].split(".")[0])
            dropper = KeyedDropout(p, args.seed, args.step, layer, name.rsplit(".", 1)[1], tokens)
            module.lora_dropout["default"] = dropper
            droppers.append(dropper)
    logits = model(input_ids=inputs).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))
    loss.backward()
    grads = [q.grad for q in model.parameters() if q.requires_grad]
    grad_norm = torch.sqrt(sum((g.double() ** 2).sum() for g in grads)).item()
    dropped = sum(d.dropped for d in droppers)
    loss_error = abs(loss.item() - record["loss"]) / abs(record["loss"])
    norm_error = abs(grad_norm - record["grad_norm"]) / record["grad_norm"]
    print(f"lora dropout {p}: {len(droppers)} adapters, {dropped} input elements dropped at step {args.step} by "
          f"PEFT {peft.__version__} given xtrain's keyed masks; loss {loss.item():.8f} vs xtrain {record['loss']:.8f} "
          f"(relative difference {loss_error:.2e}), adapter gradient norm {grad_norm:.8f} vs {record['grad_norm']:.8f} "
          f"({norm_error:.2e})")
    assert dropped > 0
    assert loss_error <= 1e-5 and norm_error <= 1e-5


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
    d = sub.add_parser("dropout-check")
    for name in ("--base", "--adapter", "--data", "--metrics"):
        d.add_argument(name, required=True)
    for name in ("--seq-len", "--step", "--seed"):
        d.add_argument(name, type=int, required=True)
    args = p.parse_args()
    torch.set_num_threads(1)
    import transformers
    transformers.utils.logging.disable_progress_bar()
    {"make": make, "check": check, "dropout-check": dropout_check}[args.command](args)


if __name__ == "__main__":
    main()

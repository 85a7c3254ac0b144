#!/usr/bin/env python3
"""Quantized Hugging Face folders as the Hub ships them, for checking that `model.init_from: hf:DIR`
dequantizes them as transformers does.

    quantized_folder.py make --format fp8 --tokenizer TOKENIZER.json --out DIR
        A small random DeepSeek-V3 (hidden 128, latent attention, layer 0 dense, layer 1 of 4
        experts beside a shared one) as DeepSeek-V3's own folder is: every projection whose
        sides are multiples of 128 stored F8_E4M3 with a float32 weight_scale_inv per 128x128
        block, quantized by transformers' own Fp8Quantize; the rest (embedding, head, norms,
        router, the latent projection of 192 rows) BF16; config.json's quantization_config
        {quant_method: fp8, fmt: e4m3, weight_block_size: [128, 128], activation_scheme:
        dynamic}; split over two files with an index, a weight and its scales apart at times.
    quantized_folder.py make --format mxfp4 --tokenizer TOKENIZER.json --out DIR
        A small random GPT-OSS (hidden 64, 4 biased experts a layer) as gpt-oss's folder is: the
        experts' gate_up_proj and down_proj as *_blocks (U8, two FP4 e2m1 values a byte, the low
        nibble first, 32 values a block) and *_scales (U8 e8m0 exponents, bias 127), laid out as
        transformers' Mxfp4 quantizer stores them (the weight transposed, blocks along its input
        side); the scale is the block's largest magnitude over 6 rounded up to a power of two and
        each value the nearest FP4 value, as triton_kernels' downcast_to_mxfp_torch does; the
        rest BF16; quantization_config {quant_method: mxfp4, modules_to_not_convert: [...]}.
    quantized_folder.py eval-loss --model DIR --data EVAL.jsonl --seq-len N
        Loads DIR with transformers, a quantized folder dequantized to float32 by transformers'
        own loader (FineGrainedFP8Config / Mxfp4Config with dequantize=True), and prints the mean
        next-token loss over the eval set cut as hf_folder.py eval-loss cuts it.
    quantized_folder.py dequantize --model DIR --out FLOAT_DIR
        The float32 folder transformers' dequantizing load gives (save_pretrained), for comparing
        weights tensor by tensor.
"""
import argparse
import json
import os
import shutil
import tempfile
import types

import torch


def save_folder(tensors, config, args, vocab):
    """tensors (name -> tensor) split over two files with an index; config.json; the tokenizer."""
    from safetensors.torch import save_file

    os.makedirs(args.out, exist_ok=True)
    names = sorted(tensors)
    # Interleaved, so that a weight and its scales often lie in different files.
    files = {"model-00001-of-00002.safetensors": names[0::2], "model-00002-of-00002.safetensors": names[1::2]}
    weight_map = {}
    for file, part in files.items():
        save_file({n: tensors[n].contiguous() for n in part}, os.path.join(args.out, file), metadata={"format": "pt"})
        weight_map.update({n: file for n in part})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    shutil.copy(args.tokenizer, os.path.join(args.out, "tokenizer.json"))
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>"}, f)
    dtypes = sorted({str(t.dtype).replace("torch.", "") for t in tensors.values()})
    print(f"{args.out}: {len(tensors)} tensors ({', '.join(dtypes)}) in 2 files, vocab {vocab}")


def float_folder(model):
    """The model as save_pretrained writes it: tensor name -> tensor, and config.json."""
    from safetensors.torch import load_file

    with tempfile.TemporaryDirectory() as tmp:
        model.float().save_pretrained(tmp, safe_serialization=True)
        tensors = {}
        for name in os.listdir(tmp):
            if name.endswith(".safetensors"):
                tensors.update(load_file(os.path.join(tmp, name)))
        with open(os.path.join(tmp, "config.json")) as f:
            config = json.load(f)
    return tensors, config


def randomize(model):
    """Biases, norm gains, the router and the expert bias start at 0 or 1: give them values."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.dim() == 1 or name.endswith("sinks"):
                parameter.add_(torch.randn_like(parameter) * 0.1)
            elif name.endswith("mlp.gate.weight") or name.endswith("router.weight"):
                parameter.copy_(torch.randn_like(parameter) * 0.05)
            elif name.endswith("_bias"):
                parameter.copy_(torch.randn_like(parameter) * 0.05)
        for name, buffer in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                buffer.copy_(torch.randn_like(buffer) * 0.05)


def make_fp8(args, vocab):
    import transformers
    from transformers.integrations.finegrained_fp8 import Fp8Quantize

    rope = dict(rope_type="yarn", rope_theta=1e6, factor=4.0, original_max_position_embeddings=32, beta_fast=32.0,
                beta_slow=1.0, mscale=1.0, mscale_all_dim=0.8)
    config = transformers.DeepseekV3Config(
        vocab_size=vocab, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=128, tie_word_embeddings=False, rms_norm_eps=1e-6,
        rope_parameters=rope, q_lora_rank=128, kv_lora_rank=128, qk_nope_head_dim=64, qk_rope_head_dim=64,
        v_head_dim=64, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=128, n_shared_experts=1,
        n_group=2, topk_group=1, routed_scaling_factor=2.5, first_k_dense_replace=1)
    model = transformers.DeepseekV3ForCausalLM(config)
    randomize(model)
    tensors, config_json = float_folder(model)
    quantization = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                    "weight_block_size": [128, 128]}
    # transformers' own quantizer: 448 / the block's largest magnitude, the inverse kept.
    quantizer = Fp8Quantize(types.SimpleNamespace(
        quantization_config=transformers.FineGrainedFP8Config(weight_block_size=(128, 128))))
    stored = {}
    for name, tensor in tensors.items():
        linear = (name.startswith("model.layers.") and name.endswith(".weight") and tensor.dim() == 2
                  and not name.endswith("mlp.gate.weight"))
        # _quantize_one leaves a matrix whose sides are not multiples of the block as it is.
        parts = quantizer._quantize_one(name, tensor) if linear else {name: tensor}
        for key, value in parts.items():
            stored[key] = value if value.dtype in (torch.float8_e4m3fn, ) or key.endswith("_scale_inv") \
                else value.to(torch.bfloat16)
    config_json["quantization_config"] = quantization
    quantized = sum(1 for t in stored.values() if t.dtype == torch.float8_e4m3fn)
    print(f"fp8: {quantized} weights F8_E4M3 with 128x128 block scales")
    save_folder(stored, config_json, args, vocab)


FP4_VALUES = [+0.0, +0.5, +1.0, +1.5, +2.0, +3.0, +4.0, +6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def mxfp4_quantize(weight):
    """weight [..., K] (K a multiple of 32) -> blocks U8 [..., K/32, 16], scales U8 [..., K/32]."""
    values = weight.float().reshape(*weight.shape[:-1], weight.shape[-1] // 32, 32)
    largest = values.abs().amax(-1)
    exponent = torch.where(largest > 0, torch.ceil(torch.log2(largest / 6.0)), torch.full_like(largest, -127.0))
    exponent = exponent.clamp(-127, 127)
    scaled = values / torch.exp2(exponent)[..., None]
    table = torch.tensor(FP4_VALUES)
    codes = (scaled[..., None] - table).abs().argmin(-1).to(torch.uint8)  # the nearest value's nibble
    blocks = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return blocks.contiguous(), (exponent + 127).to(torch.uint8)


def make_mxfp4(args, vocab):
    import transformers

    rope = dict(rope_type="yarn", rope_theta=1e6, factor=4.0, original_max_position_embeddings=32, beta_fast=32.0,
                beta_slow=1.0, truncate=False)
    config = transformers.GptOssConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=128, tie_word_embeddings=False,
        rms_norm_eps=1e-6, rope_parameters=rope, num_local_experts=4, num_experts_per_tok=2, sliding_window=8,
        swiglu_limit=1.0, layer_types=["sliding_attention", "full_attention"])
    model = transformers.GptOssForCausalLM(config)
    randomize(model)
    tensors, config_json = float_folder(model)
    stored = {}
    for name, tensor in tensors.items():
        if name.endswith("mlp.experts.gate_up_proj") or name.endswith("mlp.experts.down_proj"):
            # Stored transposed, [experts, out, in], in blocks along the input side.
            blocks, scales = mxfp4_quantize(tensor.transpose(1, 2))
            stored[name + "_blocks"], stored[name + "_scales"] = blocks, scales
        else:
            stored[name] = tensor.to(torch.bfloat16)
    config_json["quantization_config"] = {
        "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
                                   "lm_head"],
        "quant_method": "mxfp4"}
    print("mxfp4: experts' gate_up_proj and down_proj as FP4 blocks with e8m0 scales")
    save_folder(stored, config_json, args, vocab)


def load(path):
    """The folder as transformers loads it, a quantized one dequantized to float32 by its own loader."""
    import transformers

    with open(os.path.join(path, "config.json")) as f:
        method = (json.load(f).get("quantization_config") or {}).get("quant_method")
    extra = {}
    if method == "fp8":
        # transformers asks for accelerate before it reads dequantize=True; the dequantizing load
        # uses none of it, and accelerate is not among the references' dependencies.
        import transformers.quantizers.quantizer_finegrained_fp8 as fp8_quantizer
        fp8_quantizer.is_accelerate_available = lambda: True
        extra["quantization_config"] = transformers.FineGrainedFP8Config(dequantize=True)
    elif method == "mxfp4":
        extra["quantization_config"] = transformers.Mxfp4Config(dequantize=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, **extra).eval()
    for name, parameter in model.named_parameters():
        assert parameter.dtype == torch.float32, f"{name} loaded as {parameter.dtype}"
    return model


def eval_loss(args):
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(args.model)
    model = load(args.model)
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
    m.add_argument("--format", choices=["fp8", "mxfp4"], required=True)
    m.add_argument("--tokenizer", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--seed", type=int, default=11)
    e = sub.add_parser("eval-loss")
    e.add_argument("--model", required=True)
    e.add_argument("--data", required=True)
    e.add_argument("--seq-len", type=int, required=True)
    d = sub.add_parser("dequantize")
    d.add_argument("--model", required=True)
    d.add_argument("--out", required=True)
    args = p.parse_args()
    torch.set_num_threads(1)
    import transformers
    transformers.utils.logging.disable_progress_bar()
    if args.command == "make":
        from tokenizers import Tokenizer
        torch.manual_seed(args.seed)
        vocab = Tokenizer.from_file(args.tokenizer).get_vocab_size(with_added_tokens=True) + 4
        (make_fp8 if args.format == "fp8" else make_mxfp4)(args, vocab)
    elif args.command == "eval-loss":
        eval_loss(args)
    else:
        load(args.model).save_pretrained(args.out, safe_serialization=True)


if __name__ == "__main__":
    main()

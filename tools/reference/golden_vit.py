#!/usr/bin/env python3
"""A tiny random ViTForImageClassification that transformers writes, and its golden
forward/backward outputs.

Usage:
    golden_vit.py make --out DIR [--seed N] [--image-size 12] [--patch-size 4] [--labels 5]
                       [--hidden 32] [--layers 2]
    golden_vit.py golden --checkpoint DIR --batch BATCH.safetensors --out OUT.safetensors

make: a random model (dropout 0) whose biases, LayerNorm gains, class token and positions are
perturbed away from their init, so that the comparison tests them, saved with save_pretrained.

golden: the model loaded from the folder (float32, eager attention; any missing, unexpected or
mis-shaped tensor is an error), in training mode, on BATCH's pixel_values (float [N, C, H, W])
and labels (integer [N]). Outputs (float32): logits [N, labels]; loss, transformers'
single-label cross entropy (the mean over the images); grad.<name> for every parameter, under
its name in the checkpoint.
"""
import argparse
import os
import tempfile

import torch
from safetensors.torch import load_file, save_file

from hf_loading import load_checked


def make(args):
    from transformers import ViTConfig, ViTForImageClassification
    torch.manual_seed(args.seed)
    config = ViTConfig(hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=4,
                       intermediate_size=2 * args.hidden, image_size=args.image_size, patch_size=args.patch_size,
                       num_labels=args.labels, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                       layer_norm_eps=1e-6)
    model = ViTForImageClassification(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 or "cls_token" in name or "position_embeddings" in name:
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(args.out)


def golden(args):
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    from transformers import ViTForImageClassification
    model = load_checked(ViTForImageClassification, args.checkpoint, attn_implementation="eager")
    model.train()  # dropout is 0 in the config
    batch = load_file(args.batch)
    out = model(pixel_values=batch["pixel_values"].float(), labels=batch["labels"].long())
    out.loss.backward()
    result = {"logits": out.logits.detach().contiguous(), "loss": out.loss.detach()}
    # transformers renames the modules it loads (vit.layers.0.attention.q_proj, ...): the
    # gradients are saved under the checkpoint's names by saving them as the weights.
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(parameter.grad)
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder)
        for name, grad in load_file(os.path.join(folder, "model.safetensors")).items():
            result[f"grad.{name}"] = grad
    save_file(result, args.out)
    print(f"loss {out.loss.item():.6f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("--out", required=True)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--image-size", type=int, default=12)
    m.add_argument("--patch-size", type=int, default=4)
    m.add_argument("--labels", type=int, default=5)
    m.add_argument("--hidden", type=int, default=32)
    m.add_argument("--layers", type=int, default=2)
    g = sub.add_parser("golden")
    g.add_argument("--checkpoint", required=True)
    g.add_argument("--batch", required=True)
    g.add_argument("--out", required=True)
    args = p.parse_args()
    make(args) if args.command == "make" else golden(args)


if __name__ == "__main__":
    main()

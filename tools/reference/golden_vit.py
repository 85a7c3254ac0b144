#!/usr/bin/env python3
"""A tiny random ViTForImageClassification that transformers writes, and its golden
forward/backward outputs.

Usage:
    golden_vit.py make --out DIR [--seed N] [--image-size 12] [--patch-size 4] [--labels 5]
                       [--hidden 32] [--layers 2]
    golden_vit.py golden --checkpoint DIR --batch BATCH.safetensors --out OUT.safetensors [--steps K]

make: a random model (dropout 0) whose biases, LayerNorm gains, class token and positions are
perturbed away from their init, so that the comparison tests them, saved with save_pretrained.

golden: the model loaded from the folder (float32, eager attention; any missing, unexpected or
mis-shaped tensor is an error), in training mode, on BATCH's pixel_values (float [N, C, H, W])
and labels (integer [N]). Outputs (float32): logits [N, labels]; loss, transformers'
single-label cross entropy (the mean over the images); grad.<name> for every parameter, under
its name in the checkpoint. With --steps K: train_losses [K] and final.<name> after K steps of
clipping (1.0) + torch.optim.AdamW (betas 0.9, 0.95, eps 1e-8, the decay on matrices but the
class token and positions) on the batch, and final64.<name> after the same steps in float64
(golden.py's Float64Everywhere), the yardstick of float32's own rounding noise.
"""
import argparse
import os
import tempfile

import torch
from safetensors.torch import load_file, save_file

from golden_steps import add_golden_parser, prepare, trajectory
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


def checkpoint_names(model):
    """named_parameters() name -> the checkpoint's name: transformers renames the modules it loads
    (vit.layers.0.attention.q_proj, ...), so each parameter is filled with its index and saved."""
    names = [name for name, _ in model.named_parameters()]
    with torch.no_grad():
        saved = [p.detach().clone() for p in model.parameters()]
        for index, p in enumerate(model.parameters()):
            p.fill_(index)
        with tempfile.TemporaryDirectory() as folder:
            model.save_pretrained(folder)
            stored = load_file(os.path.join(folder, "model.safetensors"))
        for p, value in zip(model.parameters(), saved):
            p.copy_(value)
    return {names[int(t.flatten()[0].item())]: name for name, t in stored.items()}


def decays(name, p):
    """Matrices decay, but the class token and the positions (vit's spec)."""
    return p.dim() >= 2 and "cls_token" not in name and "position_embeddings" not in name


def golden(args):
    prepare()
    from transformers import ViTForImageClassification

    def load():
        return load_checked(ViTForImageClassification, args.checkpoint, attn_implementation="eager").train()

    model = load()  # dropout is 0 in the config
    names = checkpoint_names(model)
    batch = load_file(args.batch)
    pixels, labels = batch["pixel_values"].float(), batch["labels"].long()
    out = model(pixel_values=pixels, labels=labels)
    out.loss.backward()
    result = {"logits": out.logits.detach().contiguous(), "loss": out.loss.detach()}
    for name, parameter in model.named_parameters():
        result[f"grad.{names[name]}"] = parameter.grad.detach().clone()
    if args.steps > 0:
        result.update(trajectory(load, lambda m: m(pixel_values=pixels.to(m.dtype), labels=labels).loss, decays, args,
                                 name=lambda n: names[n]))
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
    add_golden_parser(sub)
    args = p.parse_args()
    make(args) if args.command == "make" else golden(args)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A tiny random CLIPModel that transformers writes, and its golden forward/backward outputs.

Usage:
    golden_clip.py make --out DIR [--seed N] [--eos 2] [--vocab 100] [--image-size 12]
                        [--patch-size 4] [--hidden 32] [--layers 2] [--positions 16]
    golden_clip.py golden --checkpoint DIR --batch BATCH.safetensors --out OUT.safetensors

make: a random model whose biases, LayerNorm gains, class token and logit_scale are perturbed
away from their init, so that the comparison tests them, saved with save_pretrained. The text
config's eos_token_id is --eos: 2 selects transformers' older pooling (the row's highest id),
any other the first occurrence of that id.

golden: the model loaded from the folder (float32, eager attention; any missing, unexpected or
mis-shaped tensor is an error), in training mode, on BATCH's input_ids (integer [N, T]) and
pixel_values (float [N, C, H, W]), with return_loss. Outputs (float32): logits_per_image
[N, N]; loss, CLIP's symmetric contrastive loss; grad.<name> for every parameter, under its
name in the checkpoint.
"""
import argparse

import torch
from safetensors.torch import load_file, save_file

from golden_vit import checkpoint_names
from hf_loading import load_checked


def make(args):
    from transformers import CLIPConfig, CLIPModel
    torch.manual_seed(args.seed)
    text = dict(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=2 * args.hidden + 4,
                num_hidden_layers=args.layers, num_attention_heads=4, max_position_embeddings=args.positions,
                layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=args.eos)
    vision = dict(hidden_size=args.hidden + 8, intermediate_size=2 * args.hidden, num_hidden_layers=args.layers,
                  num_attention_heads=4, image_size=args.image_size, patch_size=args.patch_size, layer_norm_eps=1e-5)
    config = CLIPConfig(text_config=text, vision_config=vision, projection_dim=24)
    model = CLIPModel(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() <= 1:
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(args.out)


def golden(args):
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    from transformers import CLIPModel
    model = load_checked(CLIPModel, args.checkpoint, attn_implementation="eager")
    model.train()
    names = checkpoint_names(model)
    batch = load_file(args.batch)
    out = model(input_ids=batch["input_ids"].long(), pixel_values=batch["pixel_values"].float(), return_loss=True)
    out.loss.backward()
    result = {"logits_per_image": out.logits_per_image.detach().contiguous(), "loss": out.loss.detach()}
    for name, parameter in model.named_parameters():
        result[f"grad.{names[name]}"] = parameter.grad.detach().clone()
    save_file(result, args.out)
    print(f"loss {out.loss.item():.6f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("--out", required=True)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--eos", type=int, default=2)
    m.add_argument("--vocab", type=int, default=100)
    m.add_argument("--image-size", type=int, default=12)
    m.add_argument("--patch-size", type=int, default=4)
    m.add_argument("--hidden", type=int, default=32)
    m.add_argument("--layers", type=int, default=2)
    m.add_argument("--positions", type=int, default=16)
    g = sub.add_parser("golden")
    g.add_argument("--checkpoint", required=True)
    g.add_argument("--batch", required=True)
    g.add_argument("--out", required=True)
    args = p.parse_args()
    make(args) if args.command == "make" else golden(args)


if __name__ == "__main__":
    main()

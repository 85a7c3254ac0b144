#!/usr/bin/env python3
"""A tiny random T5ForConditionalGeneration that transformers writes (T5 v1.0 or v1.1 style),
and its golden forward/backward outputs.

Usage:
    golden_t5.py make --style v1.0|v1.1 --out DIR [--seed N] [--vocab 97]
    golden_t5.py golden --checkpoint DIR --batch BATCH.safetensors --out OUT.safetensors [--steps K]

make: v1.0 is T5's original shape (feed_forward_proj relu, the output projection tied to the
shared embedding, the decoder's states scaled by d_model^-0.5); v1.1 is T5 v1.1's (gated-gelu,
an lm_head of its own, unscaled). Both: vocabulary --vocab (97), d_model 32, 6 heads of d_kv 8 (an inner
width of 48, set apart from d_model, so that d_kv is read, not derived), d_ff 64, 2 encoder and 3 decoder blocks, 8 relative-position buckets up to a distance of 10, so
that sequences of a dozen tokens reach the logarithmic buckets and the last; dropout 0. The norm
gains are perturbed away from 1, so that the comparison tests them. Saved with save_pretrained.

golden: the model loaded from the folder (float32, eager attention; any missing, unexpected or
mis-shaped tensor is an error), in training mode, on BATCH's input_ids and attention_mask
(integer [B, S]), decoder_input_ids and labels (integer [B, T], labels -100 where a position
carries no loss). Outputs (float32): logits [B, T, V]; loss, transformers' mean cross-entropy
over the labelled positions; grad.<name> for every parameter. With --steps K: train_losses [K]
and final.<name> after K steps of clipping (1.0) + torch.optim.AdamW (betas 0.9, 0.95, eps 1e-8,
the decay on matrices but the relative-position tables, t5's spec), and final64.<name> after the
same steps in float64 (golden.py's Float64Everywhere), the yardstick of float32's own rounding.
"""
import argparse

import torch
from safetensors.torch import load_file, save_file

from golden_steps import add_golden_parser, prepare, trajectory
from hf_loading import load_checked


def make(args):
    from transformers import T5Config, T5ForConditionalGeneration
    torch.manual_seed(args.seed)
    shape = dict(vocab_size=args.vocab, d_model=32, d_kv=8, num_heads=6, d_ff=64, num_layers=2, num_decoder_layers=3,
                 relative_attention_num_buckets=8, relative_attention_max_distance=10, dropout_rate=0.0,
                 layer_norm_epsilon=1e-6, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    if args.style == "v1.1":
        shape.update(feed_forward_proj="gated-gelu", tie_word_embeddings=False)
    model = T5ForConditionalGeneration(T5Config(**shape))
    with torch.no_grad():
        if args.style == "v1.1":  # transformers 5 builds the head tied; v1.1's is its own matrix
            model.lm_head.weight = torch.nn.Parameter(torch.randn(args.vocab, 32) * 32 ** -0.5)
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(args.out)


def decays(name, p):
    return p.dim() >= 2 and "relative_attention_bias" not in name


def forward(model, batch):
    return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                 decoder_input_ids=batch["decoder_input_ids"], labels=batch["labels"], use_cache=False)


def golden(args):
    prepare()
    from transformers import T5ForConditionalGeneration

    def load():
        return load_checked(T5ForConditionalGeneration, args.checkpoint, attn_implementation="eager").train()

    model = load()
    batch = {k: v.long() for k, v in load_file(args.batch).items()}
    out = forward(model, batch)
    out.loss.backward()
    result = {"logits": out.logits.detach().contiguous(), "loss": out.loss.detach()}
    for name, parameter in model.named_parameters():
        result[f"grad.{name}"] = parameter.grad.detach().clone()
    if args.steps > 0:
        result.update(trajectory(load, lambda m: forward(m, batch).loss, decays, args))
    save_file(result, args.out)
    print(f"loss {out.loss.item():.6f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("--style", choices=["v1.0", "v1.1"], required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--vocab", type=int, default=97)
    add_golden_parser(sub)
    args = p.parse_args()
    make(args) if args.command == "make" else golden(args)


if __name__ == "__main__":
    main()

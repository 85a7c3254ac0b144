#!/usr/bin/env python3
"""transformers' T5ForConditionalGeneration loss on a batch that `xtrain data batch` wrote for
data.objective span_corruption: rows [encoder input | decoder input] and labels -100 over the
encoder's part, split at --encoder-length.

Usage:
    t5_loss.py MODEL_DIR BATCH.safetensors --encoder-length N
Prints: loss L (mean cross-entropy over the labelled decoder positions, transformers' own).
"""
import argparse

import torch
from safetensors.torch import load_file

from hf_loading import load_checked


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model")
    p.add_argument("batch")
    p.add_argument("--encoder-length", type=int, required=True)
    args = p.parse_args()
    torch.set_num_threads(1)
    from transformers import T5ForConditionalGeneration
    model = load_checked(T5ForConditionalGeneration, args.model, attn_implementation="eager").eval()
    batch = {k: v.long() for k, v in load_file(args.batch).items()}
    n = args.encoder_length
    with torch.no_grad():
        out = model(input_ids=batch["input_ids"][:, :n].contiguous(),
                    decoder_input_ids=batch["input_ids"][:, n:].contiguous(),
                    labels=batch["labels"][:, n:].contiguous(), use_cache=False)
    print(f"loss {out.loss.item():.6f}")


if __name__ == "__main__":
    main()

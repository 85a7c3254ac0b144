#!/usr/bin/env python3
"""Golden forward/backward outputs of a masked-language model (transformers' BertForMaskedLM).

The model is loaded from an HF folder with `AutoModelForMaskedLM.from_pretrained` in float32
with eager attention; any missing, unexpected or mis-shaped tensor is an error.

Usage:
    golden_mlm.py --checkpoint DIR --batch BATCH.safetensors --out OUT.safetensors

Inputs (BATCH.safetensors): input_ids, attention_mask and labels, integer [B, T] (labels -100
where a position carries no loss).

Outputs (float32): logits [B, T, V]; loss, transformers' mean cross-entropy over the labelled
positions; grad.<name> for every parameter of named_parameters().
"""
import argparse

import torch
from safetensors.torch import load_file, save_file

from hf_loading import load_checked


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--batch", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    from transformers import AutoModelForMaskedLM
    model = load_checked(AutoModelForMaskedLM, args.checkpoint, attn_implementation="eager")
    model.train()  # dropout is 0 in the exported config
    batch = {k: v.long() for k, v in load_file(args.batch).items()}
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"])
    out.loss.backward()
    result = {"logits": out.logits.detach().contiguous(), "loss": out.loss.detach()}
    for name, parameter in model.named_parameters():
        result[f"grad.{name}"] = parameter.grad.detach().clone()
    save_file(result, args.out)
    print(f"loss {out.loss.item():.6f}")


if __name__ == "__main__":
    main()

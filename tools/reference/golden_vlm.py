#!/usr/bin/env python3
"""Golden forward/backward outputs of a vision-language model (transformers' LlavaForConditionalGeneration).

The model is loaded from an HF folder with `LlavaForConditionalGeneration.from_pretrained` in
float32 with eager attention; any missing, unexpected or mis-shaped tensor is an error.

Usage:
    golden_vlm.py --checkpoint DIR --batch BATCH.safetensors --out OUT.safetensors

Inputs (BATCH.safetensors): input_ids and labels, integer [B, T] (labels as transformers takes
them: unshifted, -100 where a position carries no loss, the image positions among them);
pixel_values, float [images, channels, size, size].

Outputs (float32): logits [B, T, V]; loss, transformers' causal-LM loss of the labels;
grad.<name> for every parameter, under its name in the folder's model.safetensors (the
checkpoint's names, not the modules'), zeros for a parameter that no output reads.
"""
import argparse
import os

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from hf_loading import load_checked

# transformers' module names -> its checkpoint names (the inverse of its llava conversion mapping).
RENAMES = [("model.language_model.", "language_model.model."), ("lm_head.", "language_model.lm_head."),
           ("model.vision_tower.", "vision_tower."), ("model.multi_modal_projector.", "multi_modal_projector.")]


def checkpoint_name(name):
    for module_prefix, stored_prefix in RENAMES:
        if name.startswith(module_prefix):
            return stored_prefix + name[len(module_prefix):]
    raise KeyError(f"no checkpoint name for parameter {name}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--batch", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    from transformers import LlavaForConditionalGeneration
    model = load_checked(LlavaForConditionalGeneration, args.checkpoint, attn_implementation="eager")
    with safe_open(os.path.join(args.checkpoint, "model.safetensors"), "pt") as f:
        stored = set(f.keys())
    names = {name: checkpoint_name(name) for name, _ in model.named_parameters()}
    if set(names.values()) != stored:
        raise KeyError(f"parameters and stored tensors differ: {sorted(set(names.values()) ^ stored)}")
    model.train()  # dropout is 0 in the exported config
    batch = load_file(args.batch)
    out = model(input_ids=batch["input_ids"].long(), pixel_values=batch["pixel_values"].float(),
                labels=batch["labels"].long())
    out.loss.backward()
    result = {"logits": out.logits.detach().contiguous(), "loss": out.loss.detach()}
    for name, parameter in model.named_parameters():
        grad = parameter.grad if parameter.grad is not None else torch.zeros_like(parameter)
        result[f"grad.{names[name]}"] = grad.detach().clone().contiguous()
    save_file(result, args.out)
    print(f"loss {out.loss.item():.6f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The masked-LM loss and masked-token accuracy transformers computes for a batch.

Usage:
    mlm_loss.py FOLDER BATCH.safetensors

FOLDER is a Hugging Face folder (xtrain export); BATCH holds input_ids, labels and
attention_mask, integer [B, T] (xtrain data batch). Prints
"transformers: mlm loss L | accuracy A | N targets": the mean cross-entropy over the labelled
positions, as BertForMaskedLM's loss, and the share of them whose top-1 prediction is the label.
"""
import sys

import torch
from safetensors.torch import load_file

from hf_loading import load_checked


def main():
    folder, batch_path = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    from transformers import AutoModelForMaskedLM
    model = load_checked(AutoModelForMaskedLM, folder)
    model.eval()
    batch = {k: v.long() for k, v in load_file(batch_path).items()}
    with torch.no_grad():
        out = model(**batch)
    labelled = batch["labels"] != -100
    accuracy = (out.logits.argmax(-1)[labelled] == batch["labels"][labelled]).double().mean().item()
    print(f"transformers: mlm loss {out.loss.item():.6f} | accuracy {accuracy:.4f} | {int(labelled.sum())} targets")


if __name__ == "__main__":
    main()

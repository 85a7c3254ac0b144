#!/usr/bin/env python3
"""A small generated image-classification set, and a ViT's accuracy on it in transformers.

Usage:
    vit_images.py make --out DIR [--size 16] [--train 256] [--eval 128] [--seed 0]
    vit_images.py accuracy --model DIR --data DIR/eval.jsonl

make: RGB PNGs of size x size pixels on a noisy background, each with one bright square of
random colour and side (size/4 .. size/2 - 1) placed wholly inside one quadrant; the label is the
quadrant (0 top left, 1 top right, 2 bottom left, 3 bottom right), so chance is 1/4 and the class
is in where the square is, not in its colour. Writes DIR/images/*.png, DIR/train.jsonl and
DIR/eval.jsonl ({"image": "images/N.png", "label": Q} records, disjoint images).

accuracy: the model (ViTForImageClassification, float32) on every record, each image read with
Pillow, resized bilinearly to the model's image_size, scaled by 1/255 and normalised with mean
and std 0.5 (ViTImageProcessor's defaults, as xtrain's image-class data reads them). Prints
"accuracy A | N images | loss L".
"""
import argparse
import json
import os

import numpy as np
import torch


def make(args):
    from PIL import Image
    rng = np.random.default_rng(args.seed)
    os.makedirs(os.path.join(args.out, "images"), exist_ok=True)
    s, half = args.size, args.size // 2
    for split, count in (("train", args.train), ("eval", args.eval)):
        with open(os.path.join(args.out, f"{split}.jsonl"), "w") as f:
            for i in range(count):
                label = int(rng.integers(0, 4))
                pixels = rng.integers(0, 96, size=(s, s, 3), dtype=np.uint8)
                side = int(rng.integers(max(1, s // 4), half))
                y0 = (label // 2) * half + int(rng.integers(0, half - side + 1))
                x0 = (label % 2) * half + int(rng.integers(0, half - side + 1))
                pixels[y0:y0 + side, x0:x0 + side] = rng.integers(160, 256, size=3, dtype=np.uint8)
                name = f"images/{split}-{i:05d}.png"
                Image.fromarray(pixels, "RGB").save(os.path.join(args.out, name))
                f.write(json.dumps({"image": name, "label": label}) + "\n")


def accuracy(args):
    from PIL import Image
    from transformers import ViTForImageClassification
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    torch.set_num_threads(1)
    model = ViTForImageClassification.from_pretrained(args.model, dtype=torch.float32).eval()
    size = model.config.image_size
    folder = os.path.dirname(os.path.abspath(args.data))
    records = [json.loads(line) for line in open(args.data) if line.strip()]
    pixels, labels = [], []
    for r in records:
        image = Image.open(os.path.join(folder, r["image"])).convert("RGB").resize((size, size), Image.BILINEAR)
        x = torch.from_numpy(np.asarray(image, dtype=np.float32) / 255.0).permute(2, 0, 1)
        pixels.append((x - 0.5) / 0.5)
        labels.append(r["label"])
    with torch.no_grad():
        out = model(pixel_values=torch.stack(pixels), labels=torch.tensor(labels))
    correct = (out.logits.argmax(-1) == torch.tensor(labels)).float().mean().item()
    print(f"accuracy {correct:.4f} | {len(records)} images | loss {out.loss.item():.9g}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("--out", required=True)
    m.add_argument("--size", type=int, default=16)
    m.add_argument("--train", type=int, default=256)
    m.add_argument("--eval", type=int, default=128)
    m.add_argument("--seed", type=int, default=0)
    a = sub.add_parser("accuracy")
    a.add_argument("--model", required=True)
    a.add_argument("--data", required=True)
    args = p.parse_args()
    make(args) if args.command == "make" else accuracy(args)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A small generated (image, caption) set, and a CLIP model's zero-shot accuracy on it in transformers.

Usage:
    clip_pairs.py make --out DIR [--size 16] [--train 256] [--eval 90] [--seed 0]
    clip_pairs.py zero-shot --model DIR --data DIR/eval.jsonl --seq-len N

make: RGB PNGs of size x size pixels on a dark noisy background, each with one shape (square,
circle or triangle) of one colour (red, green or blue) at a random place and size; the caption
names both ("a red circle"), so there are 9 captions and zero-shot chance is 1/9. Writes
DIR/images/*.png, DIR/train.jsonl and DIR/eval.jsonl ({"image": ..., "caption": ...} records,
disjoint images).

zero-shot: the model (CLIPModel, float32) scores every eval image against the 9 captions, each
encoded as xtrain's byte tokenizer does (UTF-8 bytes, then the end-of-text id 256, padded with it
to seq_len), the images normalised with CLIP's mean and std (they are already the model's size,
so CLIPImageProcessor's resize and crop keep them); an image counts when its own caption scores
highest. Prints "zero-shot accuracy A | N images | chance C | colour right X, shape right Y
(chance 1/3 each)": the shares of the images whose best caption names their colour, their shape.
"""
import argparse
import json
import os

import numpy as np
import torch

COLOURS = {"red": (220, 40, 40), "green": (40, 200, 60), "blue": (50, 80, 230)}
SHAPES = ("square", "circle", "triangle")
CAPTIONS = [f"a {c} {s}" for c in COLOURS for s in SHAPES]


def draw(rng, size, colour, shape):
    pixels = rng.integers(0, 60, size=(size, size, 3), dtype=np.uint8)
    side = int(rng.integers(size // 2, size - 2))
    y0, x0 = (int(rng.integers(0, size - side + 1)) for _ in range(2))
    yy, xx = np.mgrid[0:side, 0:side]
    if shape == "square":
        mask = np.ones((side, side), bool)
    elif shape == "circle":
        c = (side - 1) / 2
        mask = (yy - c) ** 2 + (xx - c) ** 2 <= (side / 2) ** 2
    else:  # triangle, apex up
        mask = np.abs(xx - (side - 1) / 2) <= yy / 2 + 0.5
    region = pixels[y0:y0 + side, x0:x0 + side]
    region[mask] = COLOURS[colour]
    return pixels


def make(args):
    from PIL import Image
    rng = np.random.default_rng(args.seed)
    os.makedirs(os.path.join(args.out, "images"), exist_ok=True)
    for split, count in (("train", args.train), ("eval", args.eval)):
        with open(os.path.join(args.out, f"{split}.jsonl"), "w") as f:
            for i in range(count):
                colour = list(COLOURS)[int(rng.integers(0, 3))]
                shape = SHAPES[int(rng.integers(0, 3))]
                name = f"images/{split}-{i:05d}.png"
                Image.fromarray(draw(rng, args.size, colour, shape), "RGB").save(os.path.join(args.out, name))
                f.write(json.dumps({"image": name, "caption": f"a {colour} {shape}"}) + "\n")


def zero_shot(args):
    from PIL import Image
    from transformers import CLIPModel
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    torch.set_num_threads(1)
    model = CLIPModel.from_pretrained(args.model, dtype=torch.float32).eval()
    size = model.config.vision_config.image_size
    eos = 256
    ids = torch.full((len(CAPTIONS), args.seq_len), eos, dtype=torch.long)
    for row, caption in enumerate(CAPTIONS):
        data = list(caption.encode("utf-8"))[: args.seq_len - 1]
        ids[row, : len(data)] = torch.tensor(data)
    mean = torch.tensor([0.48145466, 0.4578275, 0.40821073]).view(3, 1, 1)
    std = torch.tensor([0.26862954, 0.26130258, 0.27577711]).view(3, 1, 1)
    folder = os.path.dirname(os.path.abspath(args.data))
    records = [json.loads(line) for line in open(args.data) if line.strip()]
    pixels = []
    for r in records:
        image = Image.open(os.path.join(folder, r["image"])).convert("RGB")
        assert image.size == (size, size), (image.size, size)
        x = torch.from_numpy(np.asarray(image, dtype=np.float32) * np.float32(1 / 255)).permute(2, 0, 1)
        pixels.append((x - mean) / std)
    with torch.no_grad():
        logits = model(input_ids=ids, pixel_values=torch.stack(pixels)).logits_per_image
    truth = torch.tensor([CAPTIONS.index(r["caption"]) for r in records])
    guess = logits.argmax(-1)
    accuracy = (guess == truth).float().mean().item()
    # Captions run colour-major: index // 3 is the colour, index % 3 the shape.
    colour = (guess // len(SHAPES) == truth // len(SHAPES)).float().mean().item()
    shape = (guess % len(SHAPES) == truth % len(SHAPES)).float().mean().item()
    print(f"zero-shot accuracy {accuracy:.4f} | {len(records)} images | chance {1 / len(CAPTIONS):.4f} | "
          f"colour right {colour:.4f}, shape right {shape:.4f} (chance 1/3 each)")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("--out", required=True)
    m.add_argument("--size", type=int, default=16)
    m.add_argument("--train", type=int, default=256)
    m.add_argument("--eval", type=int, default=90)
    m.add_argument("--seed", type=int, default=0)
    z = sub.add_parser("zero-shot")
    z.add_argument("--model", required=True)
    z.add_argument("--data", required=True)
    z.add_argument("--seq-len", type=int, required=True)
    args = p.parse_args()
    make(args) if args.command == "make" else zero_shot(args)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""torchvision's RandomResizedCrop + RandomHorizontalFlip on PIL images, against xtrain's draws.

Usage:
    random_resized_crop.py check --batch FILE.safetensors --data TRAIN.jsonl --image-size S
        [--scale 0.08 1.0] [--ratio 0.75 1.3333333333333333] [--hflip 0.5]

FILE is `xtrain data batch RECIPE --split train --out FILE` of an image classifier with
data.crop_scale / data.hflip: its "augmentation" rows (top, left, height, width, mirrored) are
the boxes and flips xtrain drew for the samples, its "pixel_values" what the model read.

1. Pixels: each sample's image is read with Pillow and transformed as torchvision's
   transforms.functional does on a PIL image given the same box and flip
   (img.crop((left, top, left + width, top + height)).resize((S, S), BILINEAR), then
   transpose(FLIP_LEFT_RIGHT)), scaled by 1/255 and normalised with mean and std 0.5; the largest
   difference from xtrain's pixel_values is printed (0 expected: both are Pillow's arithmetic).
2. Draws: as many boxes drawn by torchvision's RandomResizedCrop.get_params (its algorithm, with
   Python's random module: ten tries of a log-uniform aspect and a uniform area share, sides
   rounded with round(), then the centre-crop fallback) on the same image sizes; the mean and
   quartiles of the area share, the mean log aspect ratio, the mean relative position and the
   flip rate are printed for both, and each difference is held to a few standard errors.
"""
import argparse
import json
import math
import os
import random

import numpy as np
from PIL import Image
from safetensors.numpy import load_file


def get_params(height, width, scale, ratio, rng):
    area = height * width
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target_area = area * rng.uniform(scale[0], scale[1])
        aspect_ratio = math.exp(rng.uniform(log_ratio[0], log_ratio[1]))
        w = int(round(math.sqrt(target_area * aspect_ratio)))
        h = int(round(math.sqrt(target_area / aspect_ratio)))
        if 0 < w <= width and 0 < h <= height:
            i = rng.randint(0, height - h)
            j = rng.randint(0, width - w)
            return i, j, h, w
    in_ratio = float(width) / float(height)
    if in_ratio < min(ratio):
        w = width
        h = int(round(w / min(ratio)))
    elif in_ratio > max(ratio):
        h = height
        w = int(round(h * max(ratio)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def statistics(boxes, sizes):
    boxes = np.asarray(boxes, dtype=np.float64)
    heights, widths = np.asarray(sizes, dtype=np.float64).T
    share = boxes[:, 2] * boxes[:, 3] / (heights * widths)
    return {
        "area share mean": share.mean(),
        "area share q25": np.quantile(share, 0.25),
        "area share q75": np.quantile(share, 0.75),
        "log aspect mean": np.log(boxes[:, 3] / boxes[:, 2]).mean(),
        "top / free rows": np.mean(boxes[:, 0] / np.maximum(heights - boxes[:, 2], 1)),
        "left / free columns": np.mean(boxes[:, 1] / np.maximum(widths - boxes[:, 3], 1)),
        "mirrored": boxes[:, 4].mean(),
    }


def check(args):
    batch = load_file(args.batch)
    drawn, pixels = batch["augmentation"], batch["pixel_values"]
    folder = os.path.dirname(args.data)
    records = [json.loads(line) for line in open(args.data) if line.strip()][: len(drawn)]
    worst, sizes = 0.0, []
    for (top, left, height, width, mirrored), record, ours in zip(drawn, records, pixels):
        image = Image.open(os.path.join(folder, record["image"])).convert("RGB")
        sizes.append((image.height, image.width))
        image = image.crop((left, top, left + width, top + height)).resize((args.image_size,) * 2, Image.BILINEAR)
        if mirrored:
            image = image.transpose(Image.FLIP_LEFT_RIGHT)
        theirs = ((np.asarray(image, dtype=np.float32).transpose(2, 0, 1) * np.float32(1 / 255)) - 0.5) / 0.5
        worst = max(worst, float(np.abs(theirs - ours).max()))
    print(f"pixels: {len(drawn)} samples, largest difference from Pillow + torchvision's functional ops {worst:.2e}")
    rng = random.Random(args.seed)
    reference = [get_params(h, w, args.scale, args.ratio, rng) + (float(rng.random() < args.hflip),) for h, w in sizes]
    ours, theirs = statistics(drawn, sizes), statistics(reference, sizes)
    n = len(drawn)
    # Allowed differences: about 5 standard errors of the difference of two means of n draws.
    allowed = {"area share mean": 0.26, "area share q25": 0.35, "area share q75": 0.35, "log aspect mean": 0.17,
               "top / free rows": 0.3, "left / free columns": 0.3, "mirrored": 0.5}
    failed = []
    for key in ours:
        bound = 5 * allowed[key] * math.sqrt(2 / n)
        print(f"  {key:<22} xtrain {ours[key]:+.4f}  torchvision's algorithm {theirs[key]:+.4f}  (allowed {bound:.4f})")
        if abs(ours[key] - theirs[key]) > bound:
            failed.append(key)
    assert worst <= 1e-6 and not failed, (worst, failed)


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check")
    c.add_argument("--batch", required=True)
    c.add_argument("--data", required=True)
    c.add_argument("--image-size", type=int, required=True)
    c.add_argument("--scale", type=float, nargs=2, default=(0.08, 1.0))
    c.add_argument("--ratio", type=float, nargs=2, default=(3 / 4, 4 / 3))
    c.add_argument("--hflip", type=float, default=0.5)
    c.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    check(args)


if __name__ == "__main__":
    main()

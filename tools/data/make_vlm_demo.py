#!/usr/bin/env python3
"""Writes a small synthetic image-caption data set and a random LLaVA model for the
vision-language demo recipe.

Each 32x32 picture shows one filled shape (circle, square, triangle) of one colour (red, green,
blue, yellow) in one quadrant (top left, top right, bottom left, bottom right) of a noisy light
grey background: 48 combinations, each with a caption of the form "a red circle at the top left".
The task is easy enough for a tiny model to learn in minutes, yet it can only be solved by looking
at the picture, since the question never names the answer. A plain background (images/blank.png)
serves as the blanked-image control: with it, a model that reads the image should fail.

Files under DIR:
    images/{split}-NNNNN.png|.jpg   the pictures, about one in four JPEG so both decoders are used
    images/blank.png                the background alone, no shape and no noise
    train.jsonl eval.jsonl test.jsonl
                                    one conversation a line: {"images": [path], "messages": [user,
                                    assistant]}, paths relative to the JSONL file
    test.tsv                        image_path, colour, shape, position of each test record, to score
    init/                           a Hugging Face LLaVA folder with random float32 weights, written
                                    by transformers, and its CLIP preprocessor_config.json

The text vocabulary is xtrain's byte tokenizer (ids 0..255 bytes, 256 end-of-text) plus 257 for
the image placeholder. Each split cycles evenly through the 48 combinations in a seeded shuffled
order, and draws its own jitters, sizes and noise, so no test picture is a training picture.
The output is a pure function of the arguments: the same arguments write byte-identical files.

Usage:
    make_vlm_demo.py --out DIR [--train 1920] [--eval 96] [--test 96] [--seed 1]
"""

import argparse
import hashlib
import itertools
import json
import pathlib
import random

import numpy as np
import torch
from PIL import Image, ImageDraw

SIZE = 32
QUADRANT = SIZE // 2
BACKGROUND = (200, 200, 200)
NOISE = 8
COLOUR_JITTER = 20
# Kept 25 away from 0 and 255 so that the jitter never clips, and far from the grey background.
COLOURS = {"red": (230, 25, 25), "green": (25, 200, 25), "blue": (25, 25, 230), "yellow": (230, 230, 25)}
SHAPES = ["circle", "square", "triangle"]
POSITIONS = {"top left": (0, 0), "top right": (QUADRANT, 0),
             "bottom left": (0, QUADRANT), "bottom right": (QUADRANT, QUADRANT)}
COMBINATIONS = list(itertools.product(COLOURS, SHAPES, POSITIONS))
QUESTIONS = ["What is in the picture?", "Describe the image.", "What do you see?",
             "Describe the shape and where it is."]
SPLITS = ["train", "eval", "test"]
JPEG_SHARE = 0.25

BYTE_VOCAB = 256  # ids 0..255
EOS_ID = 256
IMAGE_TOKEN_ID = 257


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=pathlib.Path, required=True)
    p.add_argument("--train", type=int, default=1920)
    p.add_argument("--eval", type=int, default=96)
    p.add_argument("--test", type=int, default=96)
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


def combination_order(rng, count):
    """`count` combinations: whole shuffled cycles of all 48, so each split is balanced."""
    order = []
    while len(order) < count:
        order.extend(COMBINATIONS[i] for i in rng.permutation(len(COMBINATIONS)))
    return order[:count]


def draw_picture(rng, colour, shape, position):
    image = Image.new("RGB", (SIZE, SIZE), BACKGROUND)
    fill = tuple(int(c) for c in np.asarray(COLOURS[colour]) + rng.integers(-COLOUR_JITTER, COLOUR_JITTER + 1, 3))
    size = int(rng.integers(9, 14))
    # The shape's box spans x0..x0+size-1, so an offset up to QUADRANT-size keeps it in its quadrant.
    qx, qy = POSITIONS[position]
    x0 = qx + int(rng.integers(0, QUADRANT - size + 1))
    y0 = qy + int(rng.integers(0, QUADRANT - size + 1))
    x1, y1 = x0 + size - 1, y0 + size - 1
    draw = ImageDraw.Draw(image)
    if shape == "circle":
        draw.ellipse([x0, y0, x1, y1], fill=fill)
    elif shape == "square":
        draw.rectangle([x0, y0, x1, y1], fill=fill)
    else:
        draw.polygon([(x0, y1), (x1, y1), ((x0 + x1) / 2, y0)], fill=fill)
    # Noise over everything makes every picture distinct, so no test picture repeats a training one.
    pixels = np.asarray(image, dtype=np.int16) + rng.integers(-NOISE, NOISE + 1, (SIZE, SIZE, 3))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")


def save_picture(image, path):
    if path.suffix == ".jpg":
        image.save(path, format="JPEG", quality=95)
    else:
        image.save(path, format="PNG")


def write_split(out, split, count, seed, seen):
    """Writes the split's pictures and JSONL; returns its (path, colour, shape, position) rows."""
    # A stream of its own per split: the splits' draws differ, and resizing one leaves the others.
    rng = np.random.default_rng([seed, SPLITS.index(split)])
    rows, lines = [], []
    for index, (colour, shape, position) in enumerate(combination_order(rng, count)):
        image = draw_picture(rng, colour, shape, position)
        digest = hashlib.sha256(image.tobytes()).hexdigest()
        if digest in seen:
            raise RuntimeError(f"{split} picture {index} repeats an earlier one")
        seen.add(digest)
        suffix = ".jpg" if rng.random() < JPEG_SHARE else ".png"
        relative = f"images/{split}-{index:05d}{suffix}"
        save_picture(image, out / relative)
        question = QUESTIONS[int(rng.integers(len(QUESTIONS)))]
        record = {"images": [relative],
                  "messages": [{"role": "user", "content": "<image>\n" + question},
                               {"role": "assistant", "content": f"a {colour} {shape} at the {position}"}]}
        lines.append(json.dumps(record, sort_keys=True))
        rows.append((relative, colour, shape, position))
    (out / f"{split}.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return rows


def llava_config():
    import transformers
    vision = transformers.CLIPVisionConfig(
        hidden_size=64, intermediate_size=256, num_hidden_layers=3, num_attention_heads=4,
        image_size=SIZE, patch_size=8, projection_dim=64, hidden_act="quick_gelu")
    text = transformers.LlamaConfig(
        vocab_size=BYTE_VOCAB + 2, hidden_size=128, intermediate_size=384, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5,
        tie_word_embeddings=False, bos_token_id=None, eos_token_id=EOS_ID, pad_token_id=None)
    patches = (SIZE // 8) ** 2
    return transformers.LlavaConfig(
        vision_config=vision, text_config=text, image_token_index=IMAGE_TOKEN_ID, image_seq_length=patches,
        vision_feature_layer=-2, vision_feature_select_strategy="default", projector_hidden_act="gelu",
        multimodal_projector_bias=True, tie_word_embeddings=False)


def image_processor_class():
    try:  # transformers 5: the plain name needs torchvision; the PIL one writes the same config
        from transformers import CLIPImageProcessorPil
        return CLIPImageProcessorPil
    except ImportError:  # transformers 4
        from transformers import CLIPImageProcessor
        return CLIPImageProcessor


def write_init(folder, seed):
    """Writes the random model and its preprocessor config; returns the parameter count."""
    import transformers
    config = llava_config()
    torch.manual_seed(seed)  # the initial weights depend on this alone
    model = transformers.LlavaForConditionalGeneration(config).float()
    model.save_pretrained(folder, safe_serialization=True)
    processor = image_processor_class()(size={"shortest_edge": SIZE}, crop_size={"height": SIZE, "width": SIZE})
    processor.save_pretrained(folder)
    loaded = transformers.LlavaConfig.from_pretrained(folder)
    if loaded.image_token_index != IMAGE_TOKEN_ID or loaded.text_config.vocab_size != BYTE_VOCAB + 2:
        raise RuntimeError(f"{folder}/config.json does not load back as written")
    for name in ("model.safetensors", "preprocessor_config.json"):
        if not (folder / name).is_file():
            raise RuntimeError(f"{folder}/{name} was not written")
    return sum(p.numel() for p in model.parameters())


def main():
    args = parse_args()
    # Seeded although the data draw from their own generators: nothing drawn implicitly, here or
    # inside transformers, may vary from run to run.
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    (args.out / "images").mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (SIZE, SIZE), BACKGROUND).save(args.out / "images" / "blank.png", format="PNG")
    seen = set()
    counts = {"train": args.train, "eval": args.eval, "test": args.test}
    rows = {split: write_split(args.out, split, counts[split], args.seed, seen) for split in SPLITS}
    (args.out / "test.tsv").write_text("".join("\t".join(row) + "\n" for row in rows["test"]), encoding="utf-8")
    parameters = write_init(args.out / "init", args.seed)
    print(f"init: LLaVA with {parameters:,} parameters")
    print(f"wrote train {args.train}, eval {args.eval}, test {args.test} records to {args.out}")


if __name__ == "__main__":
    main()

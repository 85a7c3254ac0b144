#!/usr/bin/env python3
"""What Pillow decodes and what transformers' PIL-based CLIP image processor makes of images.

The processor is the slow, PIL/NumPy one: `CLIPImageProcessorPil` in transformers 5 (where
`CLIPImageProcessor` names the torchvision backend, and falls back to this class when torchvision
is missing), `CLIPImageProcessor` itself in transformers 4. Each config is loaded the way a model
folder's is, with `from_pretrained(folder)`.

Usage:
    clip_preprocess.py --out OUT.safetensors --config NAME=FOLDER [--config ...] IMAGE...

FOLDER holds a preprocessor_config.json. Output tensors, for each IMAGE (its file name as KEY):
    decoded/KEY             uint8 [H, W, 3]   Image.open(IMAGE).convert("RGB")
    alpha/KEY               uint8 [H, W]      convert("RGBA")'s alpha, when the file has transparency
  and for each config NAME:
    NAME/resized/KEY        uint8 [3, h, w]   the processor's output with do_rescale and
                                              do_normalize off: after RGB conversion, resize, crop
    NAME/pixel_values/KEY   float32 [3, h, w] the processor's output
"""

import argparse
import os

import numpy as np
import torch
from PIL import Image
from safetensors.torch import save_file

try:  # transformers 5
    from transformers import CLIPImageProcessorPil as ClipProcessor
except ImportError:  # transformers 4: the PIL-based class had the plain name
    from transformers import CLIPImageProcessor as ClipProcessor


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--config", action="append", required=True, metavar="NAME=FOLDER")
    p.add_argument("images", nargs="+")
    return p.parse_args()


def has_transparency(image):
    # transformers' convert_to_rgb composites over white exactly when this holds.
    return "A" in image.getbands() or image.info.get("transparency") is not None


def main():
    args = parse_args()
    processors = {}
    for spec in args.config:
        name, folder = spec.split("=", 1)
        processor = ClipProcessor.from_pretrained(folder)
        assert getattr(processor, "backend", "pil") == "pil", type(processor)
        processors[name] = processor
    out = {}
    for path in args.images:
        key = os.path.basename(path)
        with Image.open(path) as image:
            image.load()
            out[f"decoded/{key}"] = torch.from_numpy(np.array(image.convert("RGB")))
            if has_transparency(image):
                out[f"alpha/{key}"] = torch.from_numpy(np.array(image.convert("RGBA"))[..., 3].copy())
            for name, processor in processors.items():
                resized = processor(images=image, do_rescale=False, do_normalize=False, return_tensors="np")
                values = processor(images=image, return_tensors="np")
                out[f"{name}/resized/{key}"] = torch.from_numpy(np.ascontiguousarray(resized.pixel_values[0]))
                out[f"{name}/pixel_values/{key}"] = torch.from_numpy(np.ascontiguousarray(values.pixel_values[0]))
    save_file(out, args.out)


if __name__ == "__main__":
    main()

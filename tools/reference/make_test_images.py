#!/usr/bin/env python3
"""Writes the PNG and JPEG files the image tests decode and preprocess.

Pixels are seeded noise over gradients and a few hard edges, so that any error in decoding,
resampling weights, rounding or offsets shows. Sizes cover squares, landscape and portrait,
upscaling (97x131) and an extreme aspect ratio (1000x50). Pillow writes the common layouts
(RGB, RGBA, L, LA, P; JPEG at quality 90 with 4:2:0, 4:2:2 and 4:4:4 chroma, progressive, grey,
CMYK); the rest (16-bit, 1-, 2- and 4-bit, tRNS colour keys, Adam7 interlacing) come from the
small PNG writer below, since Pillow cannot write them.

Usage:
    make_test_images.py DIR      writes DIR/<name>.png|.jpg (names say what each one is)
"""

import os
import struct
import sys
import zlib

import numpy as np
from PIL import Image


def pattern(width, height, channels, seed, high=255):
    """Noise on gradients, with a bright block and a dark stripe: values 0..high."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    planes = []
    for c in range(channels):
        ramp = (x * (c + 1) / max(width - 1, 1) + y * (channels - c) / max(height - 1, 1)) / (channels + 1)
        plane = ramp * 0.8 + rng.normal(0.1, 0.12, (height, width))
        plane[height // 4 : height // 2, width // 3 : width // 2] = 0.97
        plane[:, (width * 3) // 4 : (width * 3) // 4 + max(width // 20, 1)] = 0.02
        planes.append(plane)
    values = np.stack(planes, axis=-1)
    return np.clip(np.round(values * high), 0, high).astype(np.uint16 if high > 255 else np.uint8)


def alpha_plane(width, height, seed):
    """Every level, with runs of fully transparent and fully opaque pixels."""
    alpha = pattern(width, height, 1, seed)[..., 0]
    alpha[: height // 5] = 0
    alpha[-(height // 5) :] = 255
    return alpha


def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def _rows(samples, depth):
    height = samples.shape[0]
    flat = samples.reshape(height, -1)
    for row in flat:
        if depth == 16:
            data = row.astype(">u2").tobytes()
        elif depth == 8:
            data = row.astype(np.uint8).tobytes()
        else:  # pack `depth` bits a sample, most significant first
            bits = np.unpackbits(row.astype(np.uint8)[:, None], axis=1)[:, 8 - depth :]
            data = np.packbits(bits.ravel()).tobytes()
        yield b"\0" + data  # filter type 0


def write_png(path, samples, color_type, depth, palette=None, trns=None, interlace=False):
    """A PNG of samples [H, W] or [H, W, C] (already at `depth`), unfiltered, zlib-compressed."""
    height, width = samples.shape[:2]
    if interlace:  # Adam7: seven reduced images, one after another
        passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
        raw = b"".join(b"".join(_rows(samples[y0::dy, x0::dx], depth))
                       for x0, y0, dx, dy in passes if samples[y0::dy, x0::dx].size)
    else:
        raw = b"".join(_rows(samples, depth))
    header = struct.pack(">IIBBBBB", width, height, depth, color_type, 0, 0, 1 if interlace else 0)
    data = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header)
    if palette is not None:
        data += _chunk(b"PLTE", np.asarray(palette, np.uint8).tobytes())
    if trns is not None:
        data += _chunk(b"tRNS", trns)
    data += _chunk(b"IDAT", zlib.compress(raw, 6)) + _chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(data)


def pillow_images(out):
    # 400x1200: a height that shrinks more than twice as much as the width, which Pillow 13
    # filters vertically first.
    sizes = [(224, 224), (300, 200), (200, 300), (640, 480), (97, 131), (1000, 50), (50, 1000), (400, 1200)]
    for i, (w, h) in enumerate(sizes):
        Image.fromarray(pattern(w, h, 3, i)).save(f"{out}/rgb_{w}x{h}.png")
    for i, (w, h) in enumerate([(224, 224), (300, 200), (200, 300), (640, 480), (97, 131), (1000, 50), (300, 900)]):
        Image.fromarray(pattern(w, h, 3, 20 + i)).save(f"{out}/jpeg420_{w}x{h}.jpg", quality=90, subsampling=2)
    for i, (w, h) in enumerate([(300, 200), (97, 131), (640, 480)]):
        Image.fromarray(pattern(w, h, 3, 30 + i)).save(f"{out}/jpeg444_{w}x{h}.jpg", quality=90, subsampling=0)
    Image.fromarray(pattern(300, 200, 3, 40)).save(f"{out}/jpeg422_300x200.jpg", quality=90, subsampling=1)
    Image.fromarray(pattern(640, 480, 3, 41)).save(f"{out}/jpeg420_progressive_640x480.jpg", quality=90,
                                                   subsampling=2, progressive=True)
    Image.fromarray(pattern(300, 200, 1, 42)[..., 0]).save(f"{out}/jpeg_grey_300x200.jpg", quality=90)
    Image.fromarray(pattern(200, 300, 4, 43), "CMYK").save(f"{out}/jpeg_cmyk_200x300.jpg", quality=90)

    rgba = np.dstack([pattern(300, 200, 3, 50), alpha_plane(300, 200, 51)])
    Image.fromarray(rgba, "RGBA").save(f"{out}/rgba_300x200.png")
    Image.fromarray(pattern(200, 300, 1, 52)[..., 0], "L").save(f"{out}/grey_200x300.png")
    la = np.dstack([pattern(97, 131, 1, 53)[..., 0], alpha_plane(97, 131, 54)])
    Image.fromarray(la, "LA").save(f"{out}/grey_alpha_97x131.png")
    Image.fromarray(pattern(640, 480, 3, 55)).quantize(256).save(f"{out}/palette_640x480.png")
    palette = Image.fromarray(pattern(300, 200, 3, 56)).quantize(64)
    palette.save(f"{out}/palette_alpha_300x200.png", transparency=bytes(range(0, 256, 4)))
    # Told apart by content, not by name.
    Image.fromarray(pattern(200, 300, 3, 57)).save(f"{out}/png_named_jpg_200x300.jpg", format="PNG")


def raw_png_images(out):
    rng = np.random.default_rng(60)
    write_png(f"{out}/rgb16_224x224.png", pattern(224, 224, 3, 61, 65535), 2, 16)
    write_png(f"{out}/rgba16_200x300.png", np.dstack([pattern(200, 300, 3, 62, 65535), pattern(200, 300, 1, 63, 65535)]), 6, 16)
    write_png(f"{out}/grey_alpha16_97x131.png", pattern(97, 131, 2, 64, 65535), 4, 16)
    # 16-bit grey: Pillow clips to 255 rather than scaling, so most values sit near it.
    write_png(f"{out}/grey16_300x200.png", pattern(300, 200, 1, 65, 1000)[..., 0], 0, 16)
    for depth in (1, 2, 4):
        levels = (pattern(97, 131, 1, 66 + depth)[..., 0].astype(np.int64) * (2**depth) // 256).astype(np.uint8)
        write_png(f"{out}/grey{depth}_97x131.png", levels, 0, depth)
    levels = (pattern(131, 97, 1, 70)[..., 0].astype(np.int64) * 16 // 256).astype(np.uint8)
    write_png(f"{out}/palette4_131x97.png", levels, 3, 4, palette=rng.integers(0, 256, (16, 3)))
    # tRNS colour keys, which Pillow matches against its 8-bit pixels and the key's low byte.
    grey2 = (pattern(200, 300, 1, 71)[..., 0].astype(np.int64) * 4 // 256).astype(np.uint8)
    write_png(f"{out}/grey2_key_200x300.png", grey2, 0, 2, trns=struct.pack(">H", 0))
    grey8 = pattern(300, 200, 1, 72)[..., 0]
    write_png(f"{out}/grey8_key_300x200.png", grey8, 0, 8, trns=struct.pack(">H", int(grey8[60, 120])))
    grey16 = pattern(224, 224, 1, 73, 600)[..., 0]
    write_png(f"{out}/grey16_key_224x224.png", grey16, 0, 16, trns=struct.pack(">H", 300))
    rgb8 = pattern(300, 200, 3, 74) // 64 * 64  # few colours, so that the key matches many pixels
    write_png(f"{out}/rgb8_key_300x200.png", rgb8, 2, 8, trns=struct.pack(">HHH", *map(int, rgb8[10, 10])))
    rgb16 = (pattern(200, 300, 3, 75) // 64 * 64).astype(np.uint16) * 257
    write_png(f"{out}/rgb16_key_200x300.png", rgb16, 2, 16, trns=struct.pack(">HHH", *map(int, rgb16[10, 10])))
    write_png(f"{out}/rgb_interlaced_300x200.png", pattern(300, 200, 3, 76), 2, 8, interlace=True)
    write_png(f"{out}/rgba16_interlaced_97x131.png", pattern(97, 131, 4, 77, 65535), 6, 16, interlace=True)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    pillow_images(out)
    raw_png_images(out)


if __name__ == "__main__":
    main()

"""Blockwise FP8 as the DeepSeek-V3 technical report (section 3.3, "Fine-grained quantization")
describes it, written out tile by tile: the reference xtrain's blockwise scaling is held to
(tests/unit/model/float8_test.cpp).

- Activations are scaled per 1 x 128 tile (one token, 128 channels), weights per 128 x 128
  block; each tile's or block's scale comes from its own maximum absolute value, taken online.
- In the weight-gradient GEMM the activations and output gradients are tiled 128 x 1 along the
  tokens, the dimension that GEMM reduces.
- Every tensor is E4M3. A partial tile at an edge is scaled by its own elements.
The scale convention is torchao's: scale = 448 / amax (in float64, rounded to float32), the
operand is saturate(x * scale) rounded to E4M3, and it stands for fp8 / scale.

Reads --inputs (safetensors: x [M, K], weight [N, K], grad_out [M, N]) and writes the quantized
operands (their E4M3 bytes as uint8 and their per-element scales) and the output and gradients
of sum(y * grad_out), each GEMM taken in float64 over the dequantized operands.
"""
import argparse

import torch
from safetensors.torch import load_file, save_file

E4M3_MAX = 448.0
EDGE = 128


def quantize_tiles(x: torch.Tensor, tile_rows: int, tile_cols: int):
    """x [R, C] in tiles of tile_rows x tile_cols: (e4m3 data, per-element float32 scales)."""
    rows, cols = x.shape
    data = torch.empty(rows, cols, dtype=torch.float8_e4m3fn)
    scales = torch.empty(rows, cols, dtype=torch.float32)
    for r in range(0, rows, tile_rows):
        for c in range(0, cols, tile_cols):
            tile = x[r:r + tile_rows, c:c + tile_cols].float()
            amax = tile.abs().max().double().clamp(min=1e-12)
            scale = (E4M3_MAX / amax).float()
            data[r:r + tile_rows, c:c + tile_cols] = (tile * scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
            scales[r:r + tile_rows, c:c + tile_cols] = scale
    return data, scales


def dequantized(operand):
    data, scales = operand
    return data.double() / scales.double()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    t = load_file(args.inputs)
    x, weight, grad_out = t["x"], t["weight"], t["grad_out"]
    operands = {
        "forward.x": quantize_tiles(x, 1, EDGE),
        "forward.weight": quantize_tiles(weight, EDGE, EDGE),
        "input_grad.grad_out": quantize_tiles(grad_out, 1, EDGE),
        "weight_grad.grad_out": quantize_tiles(grad_out, EDGE, 1),
        "weight_grad.x": quantize_tiles(x, EDGE, 1),
    }
    y = dequantized(operands["forward.x"]) @ dequantized(operands["forward.weight"]).T
    grad_x = dequantized(operands["input_grad.grad_out"]) @ dequantized(operands["forward.weight"])
    grad_weight = dequantized(operands["weight_grad.grad_out"]).T @ dequantized(operands["weight_grad.x"])
    out = {"y": y.float(), "grad_x": grad_x.float(), "grad_weight": grad_weight.float()}
    for name, (data, scales) in operands.items():
        out[name + ".bytes"] = data.view(torch.uint8).contiguous()
        out[name + ".scales"] = scales
    save_file(out, args.out)


if __name__ == "__main__":
    main()

// FP8 operands with dynamic scaling, as torchao's Float8Linear and DeepSeek-V3 define them. An
// operand is a matrix quantized in blocks: every element of a block shares one scale, computed
// from the block's current amax so that it maps onto the format's largest finite value. The
// value an operand stands for is data / scale (torchao's convention).
//
// A block is given in the matrix's own rows and columns, 0 meaning the whole dimension:
//   tensorwise  {0, 0}        one scale for the matrix;
//   rowwise     {1, 0}/{0, 1} one per row / per column (torchao's "axiswise");
//   blockwise   {1, 128}, {128, 1}, {128, 128}: DeepSeek-V3's tiles and weight blocks.
// Quantizing is `x.float() * scale`, clamped to the format's range (saturating), rounded to
// the format; every path (a layer, an FSDP unit gathering its weights in FP8, the references
// in tools/reference) computes scales and operands with these functions or their exact
// equivalent, so that the same matrix always yields the same bytes.
#pragma once
#include <cstdint>

#include <c10/core/ScalarType.h>
#include <torch/types.h>

#include "model/spec/float8_scaling.h"

namespace xtrain::model {


struct ScaleBlock {
  int64_t rows = 0, cols = 0;  // 0: the whole dimension
};

// A block's edge along a dimension of `size` (0: the whole dimension, at least 1), and the
// number of blocks along it.
int64_t block_edge(int64_t edge, int64_t size);
int64_t block_count(int64_t edge, int64_t size);

struct Float8Operand {
  torch::Tensor data;   // the format's dtype, the matrix's shape
  torch::Tensor scale;  // float32, broadcastable to data
  torch::Tensor dequantize() const;  // data.float() / scale
};

// The largest finite value of an fp8 format (448 for e4m3fn, 57344 for e5m2).
double float8_max(c10::ScalarType format);

// max / max(amax, 1e-12), divided in float64 and rounded to float32 (torchao's amax_to_scale);
// rounded down to a power of two when `power_of_two`.
torch::Tensor float8_scale(const torch::Tensor& amax, c10::ScalarType format, bool power_of_two);

// The blocks' amax of a matrix [rows, cols] (leading dimensions allowed: [..., rows, cols]):
// [..., ceil(rows / r), ceil(cols / c)], float32.
torch::Tensor block_amax(const torch::Tensor& x, ScaleBlock block);

// Block scales [..., nr, nc] spread to a matrix [..., rows, cols]: a view that broadcasts along
// a whole dimension (size 1 there), elsewhere each scale repeated over its block.
torch::Tensor spread_block_scales(const torch::Tensor& scales, int64_t rows, int64_t cols, ScaleBlock block);

// x [..., rows, cols] quantized in blocks; `scales` [..., nr, nc] when given are used as they
// are (an FSDP unit's, computed over the whole tensor), else computed from x.
Float8Operand quantize_float8(const torch::Tensor& x, c10::ScalarType format, ScaleBlock block, bool power_of_two,
                              const torch::Tensor& scales = {});

}  // namespace xtrain::model

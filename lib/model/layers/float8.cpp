#include "model/layers/float8.h"

#include <algorithm>

#include <torch/torch.h>

namespace xtrain::model {

// An empty dimension still has blocks of one: no blocks, and no division by zero.
int64_t block_edge(int64_t edge, int64_t size) { return edge == 0 ? std::max<int64_t>(size, 1) : edge; }
int64_t block_count(int64_t edge, int64_t size) { return (size + block_edge(edge, size) - 1) / block_edge(edge, size); }

torch::Tensor Float8Operand::dequantize() const { return data.to(torch::kFloat32) / scale; }

double float8_max(c10::ScalarType format) {
  switch (format) {
    case c10::ScalarType::Float8_e4m3fn: return 448.0;
    case c10::ScalarType::Float8_e5m2: return 57344.0;
    default: TORCH_CHECK(false, "float8_max: ", c10::toString(format), " is not an fp8 format");
  }
}

torch::Tensor float8_scale(const torch::Tensor& amax, c10::ScalarType format, bool power_of_two) {
  auto scale = (float8_max(format) / amax.to(torch::kFloat64).clamp_min(1e-12)).to(torch::kFloat32);
  if (power_of_two) scale = torch::exp2(torch::floor(torch::log2(scale)));
  return scale;
}

torch::Tensor block_amax(const torch::Tensor& x, ScaleBlock block) {
  const int64_t rows = x.size(-2), cols = x.size(-1);
  const int64_t r = block_edge(block.rows, rows), c = block_edge(block.cols, cols);
  const int64_t nr = block_count(block.rows, rows), nc = block_count(block.cols, cols);
  auto magnitude = x.detach().abs().to(torch::kFloat32);
  if (nr * r != rows || nc * c != cols)  // zeros leave a block's amax as it is
    magnitude = torch::constant_pad_nd(magnitude, {0, nc * c - cols, 0, nr * r - rows});
  auto shape = x.sizes().vec();
  shape.resize(shape.size() - 2);
  auto tiled = shape;
  tiled.insert(tiled.end(), {nr, r, nc, c});
  shape.insert(shape.end(), {nr, nc});
  return magnitude.reshape(tiled).amax({-3, -1}).reshape(shape);
}

torch::Tensor spread_block_scales(const torch::Tensor& scales, int64_t rows, int64_t cols, ScaleBlock block) {
  auto spread = scales;
  const int64_t r = block_edge(block.rows, rows), c = block_edge(block.cols, cols);
  if (r != rows && r != 1) spread = spread.repeat_interleave(r, -2).narrow(-2, 0, rows);
  if (c != cols && c != 1) spread = spread.repeat_interleave(c, -1).narrow(-1, 0, cols);
  return spread;
}

Float8Operand quantize_float8(const torch::Tensor& x, c10::ScalarType format, ScaleBlock block, bool power_of_two,
                              const torch::Tensor& scales) {
  torch::NoGradGuard no_grad;
  const auto block_scales = scales.defined() ? scales : float8_scale(block_amax(x, block), format, power_of_two);
  const auto spread = spread_block_scales(block_scales, x.size(-2), x.size(-1), block);
  const double max = float8_max(format);
  return {(x.detach().to(torch::kFloat32) * spread).clamp(-max, max).to(format), spread};
}

}  // namespace xtrain::model

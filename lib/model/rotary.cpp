#include "model/rotary.h"

#include <torch/torch.h>

namespace xtrain::model {

RotaryTables rotary_tables(int64_t num_positions, int64_t head_dim, double theta) {
  auto exponents = torch::arange(0, head_dim, 2, torch::kInt64).to(torch::kFloat32) / head_dim;
  auto inv_freq = 1.0 / torch::pow(torch::tensor(theta, torch::kFloat32), exponents);
  auto positions = torch::arange(num_positions, torch::kInt64).to(torch::kFloat32);
  auto freqs = torch::outer(positions, inv_freq);
  auto angles = torch::cat({freqs, freqs}, -1);
  return {angles.cos(), angles.sin()};
}

namespace {
torch::Tensor rotate_half(const torch::Tensor& x) {
  auto halves = x.chunk(2, -1);
  return torch::cat({-halves[1], halves[0]}, -1);
}
}  // namespace

torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  auto c = cos.to(x.scalar_type());
  auto s = sin.to(x.scalar_type());
  return x * c + rotate_half(x) * s;
}

}  // namespace xtrain::model

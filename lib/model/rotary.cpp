#include "model/rotary.h"

#include <cmath>

#include <torch/torch.h>

namespace xtrain::model {

namespace {
// transformers' _compute_llama3_parameters, in the same fp32 operations.
torch::Tensor llama3_scaled(const torch::Tensor& inv_freq, const RopeScaling& s) {
  const double old_context = static_cast<double>(s.original_max_len);
  const double low_freq_wavelen = old_context / s.low_freq_factor;
  const double high_freq_wavelen = old_context / s.high_freq_factor;
  const auto wavelen = 2 * M_PI / inv_freq;
  auto scaled = torch::where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq);
  const auto smooth = (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  const auto smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
  const auto medium = (wavelen >= high_freq_wavelen).logical_and(wavelen <= low_freq_wavelen);
  return torch::where(medium, smoothed, scaled);
}
}  // namespace

RotaryTables rotary_tables(int64_t num_positions, int64_t head_dim, double theta, const RopeScaling& scaling) {
  auto exponents = torch::arange(0, head_dim, 2, torch::kInt64).to(torch::kFloat32) / head_dim;
  auto inv_freq = 1.0 / torch::pow(torch::tensor(theta, torch::kFloat32), exponents);
  if (scaling.enabled()) inv_freq = llama3_scaled(inv_freq, scaling);
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

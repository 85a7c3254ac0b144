#include "model/layers/rotary.h"

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
// transformers' _compute_yarn_parameters: each frequency blended between itself (extrapolation)
// and itself / factor (interpolation) by a ramp over the dimensions whose number of turns over
// original_max_len lies between beta_fast and beta_slow.
torch::Tensor yarn_scaled(const torch::Tensor& pos_freqs, int64_t dim, double theta, const RopeScaling& s) {
  const auto correction_dim = [&](double turns) {
    return (static_cast<double>(dim) * std::log(static_cast<double>(s.original_max_len) / (turns * 2 * M_PI))) /
           (2 * std::log(theta));
  };
  double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // no zero-width ramp
  const auto ramp = ((torch::arange(dim / 2, torch::kFloat32) - low) / (high - low)).clamp(0, 1);
  const auto extrapolation = 1 - ramp;
  const auto kept = 1.0 / pos_freqs, interpolated = 1.0 / (s.factor * pos_freqs);
  return interpolated * (1 - extrapolation) + kept * extrapolation;
}
}  // namespace

RotaryTables rotary_tables(int64_t num_positions, int64_t head_dim, double theta, const RopeScaling& scaling) {
  auto exponents = torch::arange(0, head_dim, 2, torch::kInt64).to(torch::kFloat32) / head_dim;
  const auto pos_freqs = torch::pow(torch::tensor(theta, torch::kFloat32), exponents);
  torch::Tensor inv_freq;
  if (scaling.yarn())
    inv_freq = yarn_scaled(pos_freqs, head_dim, theta, scaling);
  else
    inv_freq = scaling.enabled() ? llama3_scaled(1.0 / pos_freqs, scaling) : 1.0 / pos_freqs;
  auto positions = torch::arange(num_positions, torch::kInt64).to(torch::kFloat32);
  auto freqs = torch::outer(positions, inv_freq);
  auto angles = torch::cat({freqs, freqs}, -1);
  if (!scaling.yarn()) return {angles.cos(), angles.sin()};
  const double factor = scaling.yarn_attention_factor();
  return {angles.cos() * factor, angles.sin() * factor};
}

namespace {
torch::Tensor rotate_half(const torch::Tensor& x) {
  auto halves = x.chunk(2, -1);
  return torch::cat({-halves[1], halves[0]}, -1);
}
}  // namespace

torch::Tensor deinterleave(const torch::Tensor& x) {
  using torch::indexing::Slice;
  return torch::cat({x.index({"...", Slice(0, torch::indexing::None, 2)}), x.index({"...", Slice(1, torch::indexing::None, 2)})},
                    -1);
}

torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  auto c = cos.to(x.scalar_type());
  auto s = sin.to(x.scalar_type());
  return x * c + rotate_half(x) * s;
}

torch::Tensor rotary_rows(const torch::Tensor& table, const SequenceLayout& layout, int64_t seq, int64_t shift) {
  const bool listed = layout.positions.defined();
  if (shift == 0) return listed ? table.index_select(0, layout.positions) : table.narrow(0, 0, seq);
  const auto int64_on_device = torch::TensorOptions().dtype(torch::kInt64).device(table.device());
  auto positions = listed ? layout.positions : torch::arange(seq, int64_on_device);
  return table.index_select(0, (positions + shift).clamp_max(table.size(0) - 1));
}

}  // namespace xtrain::model

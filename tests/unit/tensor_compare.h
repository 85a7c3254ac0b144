// Error measures the numeric tests compare against their tolerances. Both work in float64 so
// that the measure itself adds no rounding to the figure a test reports.
#pragma once
#include <algorithm>
#include <cmath>

#include <torch/types.h>

namespace xtrain::testing {

// max |actual - expected| / max |expected|: the worst element against the tensor's scale.
inline double max_relative_error(const torch::Tensor& actual, const torch::Tensor& expected) {
  const auto a = actual.to(torch::kFloat64), e = expected.to(torch::kFloat64);
  return (a - e).abs().max().item<double>() / std::max(e.abs().max().item<double>(), 1e-30);
}

// ||actual - expected|| / ||expected||: the error of the tensor as a whole.
inline double norm_relative_error(const torch::Tensor& actual, const torch::Tensor& expected) {
  const auto a = actual.to(torch::kFloat64), e = expected.to(torch::kFloat64);
  return (a - e).norm().item<double>() / std::max(e.norm().item<double>(), 1e-30);
}

// How far a float32 trajectory ends from the float64 one, over a tensor (the golden tests' measure): its worst element and the
// root mean square of the others (the worst element is where amplified rounding shows; the rms is
// where a systematic difference, such as a decay applied to the wrong tensors, shows). The worst
// element stays out of the rms because in a small tensor one element decides it: one of qwen3's
// 64 norm gains, flipped by chance as below, is 1.3e-2 lr off on an AVX-512 host running ATen's
// default kernels, which alone makes an rms of 1.6e-3 lr, 176% of that tensor's rms tolerance.
struct Distance {
  double max_abs = 0, rms = 0;
};

inline Distance distance(const torch::Tensor& actual, const torch::Tensor& float64) {
  const auto squares = (actual.to(torch::kFloat64) - float64).square().flatten();
  const double worst = squares.max().item<double>(), sum = squares.sum().item<double>();
  const auto others = static_cast<double>(std::max<int64_t>(1, squares.numel() - 1));
  return {std::sqrt(worst), std::sqrt(std::max(0.0, sum - worst) / others)};
}

}  // namespace xtrain::testing

// Error measures the numeric tests compare against their tolerances. Both work in float64 so
// that the measure itself adds no rounding to the figure a test reports.
#pragma once
#include <algorithm>

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

}  // namespace xtrain::testing

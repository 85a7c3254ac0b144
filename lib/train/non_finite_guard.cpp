#include "train/non_finite_guard.h"

#include <cmath>

#include <fmt/format.h>
#include <torch/torch.h>

namespace xtrain::train {

bool NonFiniteGuard::admit(int64_t step, double loss, double grad_norm) {
  if (std::isfinite(loss) && std::isfinite(grad_norm)) {
    in_a_row_ = 0;
    return true;
  }
  if (in_a_row_ == 0) first_of_run_ = step;
  ++in_a_row_;
  ++total_;
  return false;
}

bool all_finite(const std::vector<torch::Tensor>& tensors) {
  if (tensors.empty()) return true;
  // max and min propagate NaN, and an infinity is its own max or min: two reductions per
  // tensor, with no temporary as large as the tensor.
  std::vector<torch::Tensor> extremes;
  extremes.reserve(2 * tensors.size());
  torch::NoGradGuard no_grad;
  for (const auto& tensor : tensors) {
    if (tensor.numel() == 0 || !tensor.is_floating_point()) continue;
    extremes.push_back(tensor.detach().amax().to(torch::kFloat32).reshape({1}));
    extremes.push_back(tensor.detach().amin().to(torch::kFloat32).reshape({1}));
  }
  if (extremes.empty()) return true;
  return torch::isfinite(torch::cat(extremes)).all().item<bool>();
}

std::string describe_non_finite(const std::vector<std::pair<std::string, torch::Tensor>>& named) {
  torch::NoGradGuard no_grad;
  for (const auto& [name, tensor] : named) {
    if (!tensor.is_floating_point() || all_finite({tensor})) continue;
    const auto nan = torch::isnan(tensor).sum().item<int64_t>();
    const auto inf = torch::isinf(tensor).sum().item<int64_t>();
    return fmt::format("'{}' has {} NaN and {} infinite values of {}", name, nan, inf, tensor.numel());
  }
  return "";
}

void require_finite_weights(const std::vector<std::pair<std::string, torch::Tensor>>& named, const std::string& dir) {
  const std::string problem = describe_non_finite(named);
  if (problem.empty()) return;
  throw std::runtime_error(fmt::format("{}: the weights are not finite ({}); this checkpoint cannot be used: take an "
                                       "earlier one",
                                       dir, problem));
}

}  // namespace xtrain::train

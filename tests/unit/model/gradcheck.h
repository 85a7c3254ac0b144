// Finite-difference gradient check in fp64: compares autograd's gradient of
// sum(f(inputs) * R) (R a fixed random projection) with central differences.
#pragma once
#include <functional>
#include <vector>

#include <torch/torch.h>

namespace xtrain::testing {

// Returns the largest relative error over all inputs and elements.
inline double max_gradcheck_error(const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& f,
                                  std::vector<torch::Tensor> inputs, double step = 1e-6) {
  for (auto& input : inputs) input = input.detach().to(torch::kFloat64).requires_grad_(true);
  auto out = f(inputs);
  auto projection = torch::randn_like(out);
  (out * projection).sum().backward();
  double worst = 0;
  torch::NoGradGuard no_grad;
  for (auto& input : inputs) {
    auto analytic = input.grad().flatten();
    auto flat = input.view({-1});
    for (int64_t i = 0; i < flat.numel(); ++i) {
      const double original = flat[i].item<double>();
      flat[i] = original + step;
      const double plus = (f(inputs) * projection).sum().item<double>();
      flat[i] = original - step;
      const double minus = (f(inputs) * projection).sum().item<double>();
      flat[i] = original;
      const double numeric = (plus - minus) / (2 * step);
      const double error = std::abs(numeric - analytic[i].item<double>()) / std::max(1.0, std::abs(numeric));
      worst = std::max(worst, error);
    }
  }
  return worst;
}

}  // namespace xtrain::testing

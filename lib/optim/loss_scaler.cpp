#include "optim/loss_scaler.h"

#include <torch/torch.h>

namespace xtrain::optim {

DynamicLossScaler::DynamicLossScaler(LossScalerOptions options)
    : options_(options), state_{options.initial_scale, 0} {
  TORCH_CHECK(options_.initial_scale > 0 && options_.growth_factor > 1 && options_.backoff_factor > 0 &&
                  options_.backoff_factor < 1 && options_.growth_interval > 0,
              "loss scaler: need initial_scale > 0, growth_factor > 1, 0 < backoff_factor < 1, growth_interval > 0");
}

bool DynamicLossScaler::unscale(const std::vector<torch::Tensor>& parameters) const {
  torch::NoGradGuard no_grad;
  const double inverse = 1.0 / state_.scale;
  bool finite = true;
  for (const auto& p : parameters) {
    auto grad = p.grad();
    if (!grad.defined()) continue;
    grad.mul_(inverse);
    // One reduction per tensor; isfinite().all() would allocate a bool copy of the gradient.
    if (finite && !std::isfinite(grad.sum().item<double>())) finite = false;
  }
  return finite;
}

void DynamicLossScaler::update(bool finite) {
  if (!finite) {
    state_.scale *= options_.backoff_factor;
    state_.finite_steps = 0;
    return;
  }
  if (++state_.finite_steps >= options_.growth_interval) {
    state_.scale *= options_.growth_factor;
    state_.finite_steps = 0;
  }
}

}  // namespace xtrain::optim

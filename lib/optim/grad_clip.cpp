#include "optim/grad_clip.h"

#include <torch/torch.h>

namespace xtrain::optim {

double clip_grad_norm(const std::vector<torch::Tensor>& parameters, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> norms;
  for (const auto& p : parameters)
    if (p.grad().defined()) norms.push_back(p.grad().norm(2));
  if (norms.empty()) return 0.0;
  auto total = torch::stack(norms).norm(2);
  if (max_norm > 0) {
    auto coef = torch::clamp_max(max_norm / (total + 1e-6), 1.0);
    for (const auto& p : parameters)
      if (p.grad().defined()) p.grad().mul_(coef);
  }
  return total.item<double>();
}

}  // namespace xtrain::optim

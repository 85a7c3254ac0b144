#include "optim/adamw.h"

#include <cmath>

#include <fmt/format.h>
#include <torch/torch.h>

#include "util/input_error.h"

namespace xtrain::optim {

AdamW::AdamW(std::vector<NamedParameter> parameters, AdamWOptions options) : options_(options) {
  for (auto& parameter : parameters) {
    auto exp_avg = torch::zeros_like(parameter.tensor, torch::MemoryFormat::Preserve);
    auto exp_avg_sq = torch::zeros_like(parameter.tensor, torch::MemoryFormat::Preserve);
    slots_.push_back({std::move(parameter), exp_avg, exp_avg_sq});
  }
}

void AdamW::step(double lr) {
  torch::NoGradGuard no_grad;
  ++step_;
  const double bias_correction1 = 1.0 - std::pow(options_.beta1, static_cast<double>(step_));
  const double bias_correction2 = 1.0 - std::pow(options_.beta2, static_cast<double>(step_));
  const double step_size = lr / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);
  for (auto& slot : slots_) {
    auto& p = slot.parameter.tensor;
    const auto& grad = p.grad();
    if (!grad.defined()) continue;
    if (slot.parameter.decay && options_.weight_decay != 0.0) p.mul_(1.0 - lr * options_.weight_decay);
    slot.exp_avg.mul_(options_.beta1).add_(grad, 1.0 - options_.beta1);
    slot.exp_avg_sq.mul_(options_.beta2).addcmul_(grad, grad, 1.0 - options_.beta2);
    auto denom = (slot.exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(options_.eps);
    p.addcdiv_(slot.exp_avg, denom, -step_size);
  }
}

std::map<std::string, torch::Tensor> AdamW::state() const {
  std::map<std::string, torch::Tensor> state;
  for (const auto& slot : slots_) {
    state["exp_avg." + slot.parameter.name] = slot.exp_avg;
    state["exp_avg_sq." + slot.parameter.name] = slot.exp_avg_sq;
  }
  state["step"] = torch::tensor(step_, torch::kInt64);
  return state;
}

void AdamW::load_state(const std::map<std::string, torch::Tensor>& state) {
  auto fetch = [&](const std::string& key, const torch::Tensor& like) {
    auto it = state.find(key);
    if (it == state.end()) throw InputError(fmt::format("optimizer state has no entry '{}'", key));
    if (it->second.sizes() != like.sizes())
      throw InputError(fmt::format("optimizer state '{}' has shape {}, the model needs {}", key,
                                   fmt::join(it->second.sizes(), "x"), fmt::join(like.sizes(), "x")));
    return it->second;
  };
  torch::NoGradGuard no_grad;
  for (auto& slot : slots_) {
    slot.exp_avg.copy_(fetch("exp_avg." + slot.parameter.name, slot.exp_avg));
    slot.exp_avg_sq.copy_(fetch("exp_avg_sq." + slot.parameter.name, slot.exp_avg_sq));
  }
  auto step = state.find("step");
  if (step == state.end()) throw InputError("optimizer state has no entry 'step'");
  step_ = step->second.item<int64_t>();
}

}  // namespace xtrain::optim

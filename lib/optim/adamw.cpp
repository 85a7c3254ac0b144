#include "optim/adamw.h"

#include <cmath>

#include <fmt/format.h>
#include <torch/torch.h>

#include "optim/fused_adamw.h"
#include "util/input_error.h"
#include "util/numeric_fault.h"

namespace xtrain::optim {

namespace {

// The options under XTRAIN_NUMERIC_FAULT's optimizer faults (util/numeric_fault.h): what a bug that
// reads a setting wrong would use, in the multi-tensor ops and the fused kernel alike.
AdamWOptions with_numeric_fault(AdamWOptions options) {
  const auto& fault = util::numeric_fault();
  if (fault.strikes_here(util::NumericFaultKind::adamw_decay)) options.weight_decay *= util::kNumericFaultDecayScale;
  if (fault.strikes_here(util::NumericFaultKind::adamw_beta2))
    options.beta2 += util::kNumericFaultBeta2Shift * (1.0 - options.beta2);
  if (fault.strikes_here(util::NumericFaultKind::adamw_eps)) options.eps *= util::kNumericFaultEpsScale;
  return options;
}

}  // namespace

AdamW::AdamW(std::vector<NamedParameter> parameters, AdamWOptions options) : options_(options) {
  for (auto& parameter : parameters) {
    if (parameter.frozen) {
      slots_.push_back({std::move(parameter), {}, {}});
      continue;
    }
    auto exp_avg = torch::zeros_like(parameter.tensor, torch::MemoryFormat::Preserve);
    auto exp_avg_sq = torch::zeros_like(parameter.tensor, torch::MemoryFormat::Preserve);
    slots_.push_back({std::move(parameter), exp_avg, exp_avg_sq});
  }
}

void AdamW::step(double lr) {
  torch::NoGradGuard no_grad;
  ++step_;
  const AdamWOptions options = with_numeric_fault(options_);
  const double bias_correction1 = 1.0 - std::pow(options.beta1, static_cast<double>(step_));
  const double bias_correction2 = 1.0 - std::pow(options.beta2, static_cast<double>(step_));
  const double step_size = lr / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);
  // Multi-tensor (foreach) updates: one kernel launch per operation over all tensors on CUDA, a
  // loop of the same per-tensor kernels on the CPU; the arithmetic is the per-tensor one.
  std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, decayed;
  for (auto& slot : slots_) {
    const auto& grad = slot.parameter.tensor.grad();
    if (slot.parameter.frozen || !grad.defined()) continue;
    if (options.fused && fused_adamw_applies(slot.parameter.tensor, grad, slot.exp_avg, slot.exp_avg_sq)) {
      const double decay = slot.parameter.decay ? options.weight_decay : 0.0;
      fused_adamw_step(slot.parameter.tensor, grad, slot.exp_avg, slot.exp_avg_sq,
                       {lr, options.beta1, options.beta2, options.eps, decay, step_});
      continue;
    }
    params.push_back(slot.parameter.tensor);
    grads.push_back(grad);
    exp_avgs.push_back(slot.exp_avg);
    exp_avg_sqs.push_back(slot.exp_avg_sq);
    if (slot.parameter.decay) decayed.push_back(slot.parameter.tensor);
  }
  if (params.empty()) return;
  if (!decayed.empty() && options.weight_decay != 0.0) at::_foreach_mul_(decayed, 1.0 - lr * options.weight_decay);
  at::_foreach_mul_(exp_avgs, options.beta1);
  at::_foreach_add_(exp_avgs, grads, 1.0 - options.beta1);
  at::_foreach_mul_(exp_avg_sqs, options.beta2);
  at::_foreach_addcmul_(exp_avg_sqs, grads, grads, 1.0 - options.beta2);
  auto denoms = at::_foreach_sqrt(exp_avg_sqs);
  at::_foreach_div_(denoms, bias_correction2_sqrt);
  at::_foreach_add_(denoms, options.eps);
  at::_foreach_addcdiv_(params, exp_avgs, denoms, -step_size);
}

std::map<std::string, torch::Tensor> AdamW::state() const {
  std::map<std::string, torch::Tensor> state;
  for (const auto& slot : slots_) {
    const auto& p = slot.parameter;
    state["exp_avg." + p.name] = p.frozen ? torch::zeros_like(p.tensor) : slot.exp_avg;
    state["exp_avg_sq." + p.name] = p.frozen ? torch::zeros_like(p.tensor) : slot.exp_avg_sq;
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
    if (slot.parameter.frozen) continue;
    slot.exp_avg.copy_(fetch("exp_avg." + slot.parameter.name, slot.exp_avg));
    slot.exp_avg_sq.copy_(fetch("exp_avg_sq." + slot.parameter.name, slot.exp_avg_sq));
  }
  auto step = state.find("step");
  if (step == state.end()) throw InputError("optimizer state has no entry 'step'");
  step_ = step->second.item<int64_t>();
}

}  // namespace xtrain::optim

#include "model/layers/weight_grad_store.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include "model/kernels/fp16_emulation.h"
#include "model/kernels/widened_gemm.h"

namespace xtrain::model {
namespace {

thread_local WeightGradStore* installed = nullptr;

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// x W^T as F::linear computes it, with a backward that leaves W's gradient to the store. The
// bias, if any, is added outside, by autograd (an undefined tensor cannot enter apply()).
class DeferredWeightLinear : public torch::autograd::Function<DeferredWeightLinear> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               int64_t store) {
    ctx->saved_data["store"] = store;
    ctx->save_for_backward({x, weight});
    return torch::nn::functional::linear(x, weight);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const auto& grad = grad_outputs[0];
    torch::Tensor grad_x;
    if (ctx->needs_input_grad(0)) grad_x = grad.matmul(saved[1]);
    auto* store = reinterpret_cast<WeightGradStore*>(ctx->saved_data["store"].toInt());
    store->push({saved[0], grad, saved[1]});
    return {grad_x, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

void DeferredWeightGrad::run() const {
  torch::NoGradGuard no_grad;
  const auto g = grad_output.reshape({-1, grad_output.size(-1)});
  const auto gradient = g.t().mm(input.reshape({-1, input.size(-1)}));
  auto& existing = weight.mutable_grad();
  if (existing.defined())
    existing.add_(gradient);
  else
    existing = gradient;
}

WeightGradStore::Scope::Scope(WeightGradStore& store) : previous_(installed) { installed = &store; }
WeightGradStore::Scope::~Scope() { installed = previous_; }

WeightGradStore* WeightGradStore::current() { return installed; }

bool WeightGradStore::defers(const torch::Tensor& x, const torch::Tensor& weight) {
  return installed && torch::GradMode::is_enabled() && weight.is_leaf() && weight.requires_grad() &&
         x.scalar_type() == weight.scalar_type() && !fp16_emulation_enabled() && !widens_bf16_gemm(x) &&
         !widens_bf16_gemm(weight) && !at::autocast::is_autocast_enabled(x.device().type());
}

void WeightGradStore::push(DeferredWeightGrad record) {
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.push_back(std::move(record));
}

std::vector<DeferredWeightGrad> WeightGradStore::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(pending_, {});
}

torch::Tensor deferred_weight_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                     WeightGradStore& store) {
  auto output = DeferredWeightLinear::apply(x, weight, reinterpret_cast<int64_t>(&store));
  return bias.defined() ? output + bias : output;
}

}  // namespace xtrain::model

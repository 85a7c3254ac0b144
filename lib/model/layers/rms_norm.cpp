#include "model/layers/rms_norm.h"

#include <torch/torch.h>

#include "model/kernels/fused_rms_norm.h"
#include "model/layers/parameter_source.h"

namespace xtrain::model {

RMSNormImpl::RMSNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", unmaterialized({dim}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  const auto w = partial_gradient ? partial_gradient->shared(weight) : weight;
  if (fused && fused_rms_norm_applies(x, w)) return fused_rms_norm(x, w, eps_);
  auto wide = x.to(at::promote_types(x.scalar_type(), torch::kFloat32));
  auto normed = wide * torch::rsqrt(wide.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return w * normed.to(x.scalar_type());
}

std::pair<torch::Tensor, torch::Tensor> RMSNormImpl::add_and_forward(const torch::Tensor& residual,
                                                                     const torch::Tensor& update) {
  if (fused && fused_add_rms_norm_applies(residual, update, weight)) {
    const auto w = partial_gradient ? partial_gradient->shared(weight) : weight;
    return fused_add_rms_norm(residual, update, w, eps_);
  }
  auto sum = residual + update;
  return {sum, forward(sum)};
}

void RMSNormImpl::describe_init(const std::string& name, InitPlan& plan) const {
  plan[name + ".weight"] = {ParameterInit::Kind::ones, 0.0};
}

}  // namespace xtrain::model

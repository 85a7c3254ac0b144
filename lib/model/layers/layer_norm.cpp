#include "model/layers/layer_norm.h"

#include <torch/torch.h>

#include "model/layers/parameter_source.h"

namespace xtrain::model {

LayerNormImpl::LayerNormImpl(int64_t dim, double eps) : dim_(dim), eps_(eps) {
  weight = register_parameter("weight", unmaterialized({dim}));
  bias = register_parameter("bias", unmaterialized({dim}));
}

torch::Tensor LayerNormImpl::forward(const torch::Tensor& x) {
  const auto wide = at::promote_types(x.scalar_type(), torch::kFloat32);
  return torch::layer_norm(x.to(wide), {dim_}, weight.to(wide), bias.to(wide), eps_).to(x.scalar_type());
}

void LayerNormImpl::describe_init(const std::string& name, InitPlan& plan) const {
  plan[name + ".weight"] = {ParameterInit::Kind::ones, 0.0};
  plan[name + ".bias"] = {ParameterInit::Kind::zeros, 0.0};
}

}  // namespace xtrain::model

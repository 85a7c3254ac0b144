#include "model/layers/parameter_source.h"

#include <torch/torch.h>

namespace xtrain::model {

torch::Tensor unmaterialized(torch::IntArrayRef shape) { return torch::zeros({1}).expand(shape); }

bool is_materialized(const torch::Tensor& parameter) {
  return parameter.numel() <= 1 || parameter.is_non_overlapping_and_dense();
}

void place_unmaterialized(torch::nn::Module& module, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  for (auto& parameter : module.parameters()) {
    // A one-element parameter (clip's logit_scale) looks materialised either way.
    TORCH_CHECK(parameter.numel() <= 1 || !is_materialized(parameter),
                "place_unmaterialized: a parameter already holds values");
    parameter.set_data(torch::zeros({1}, parameter.options().device(device)).expand(parameter.sizes()));
  }
  for (auto& buffer : module.buffers()) buffer.set_data(buffer.to(device));
}

void materialize(torch::nn::Module& module, const ParameterSource& source) {
  torch::NoGradGuard no_grad;
  for (auto& item : module.named_parameters()) {
    auto& parameter = item.value();
    auto values = source(item.key(), 0, parameter.numel());
    parameter.set_data(values.to(parameter.device(), torch::kFloat32).reshape(parameter.sizes()).contiguous());
  }
}

}  // namespace xtrain::model

#include "model/swiglu.h"

#include <torch/torch.h>

#include "model/fp16_emulation.h"

namespace xtrain::model {

SwiGLUImpl::SwiGLUImpl(int64_t hidden_size, int64_t intermediate_size) {
  auto linear = [](int64_t in, int64_t out) {
    return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
  };
  gate_proj = register_module("gate_proj", linear(hidden_size, intermediate_size));
  up_proj = register_module("up_proj", linear(hidden_size, intermediate_size));
  down_proj = register_module("down_proj", linear(intermediate_size, hidden_size));
}

torch::Tensor SwiGLUImpl::forward(const torch::Tensor& x) {
  return project(down_proj, torch::silu(project(gate_proj, x)) * project(up_proj, x));
}

void SwiGLUImpl::init_weights(double std, double output_std) {
  torch::NoGradGuard no_grad;
  gate_proj->weight.normal_(0.0, std);
  up_proj->weight.normal_(0.0, std);
  down_proj->weight.normal_(0.0, output_std);
}

}  // namespace xtrain::model

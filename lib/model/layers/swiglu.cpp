#include "model/layers/swiglu.h"

#include <torch/torch.h>

#include "model/kernels/fused_swiglu.h"

namespace xtrain::model {

SwiGLUImpl::SwiGLUImpl(int64_t hidden_size, int64_t intermediate_size) {
  gate_proj = register_module("gate_proj", Linear(hidden_size, intermediate_size, false));
  up_proj = register_module("up_proj", Linear(hidden_size, intermediate_size, false));
  down_proj = register_module("down_proj", Linear(intermediate_size, hidden_size, false));
}

torch::Tensor SwiGLUImpl::gated(const torch::Tensor& x) {
  const auto gate = gate_proj(x), up = up_proj(x);
  return fused && fused_swiglu_applies(gate, up) ? fused_swiglu(gate, up) : torch::silu(gate) * up;
}

torch::Tensor SwiGLUImpl::forward(const torch::Tensor& x) {
  if (!tensor_parallel) return down_proj(gated(x));
  return tensor_parallel->leave(down_proj(gated(tensor_parallel->enter(x))));
}

void SwiGLUImpl::describe_init(const std::string& name, double std, double output_std, InitPlan& plan) const {
  gate_proj->describe_init(name + ".gate_proj", std, plan);
  up_proj->describe_init(name + ".up_proj", std, plan);
  down_proj->describe_init(name + ".down_proj", output_std, plan);
}

void SwiGLUImpl::float8_layers(const std::string& name, Float8Layers& layers) {
  layers.linears.emplace_back(module_name(name, "gate_proj"), gate_proj.get());
  layers.linears.emplace_back(module_name(name, "up_proj"), up_proj.get());
  layers.linears.emplace_back(module_name(name, "down_proj"), down_proj.get());
}

}  // namespace xtrain::model

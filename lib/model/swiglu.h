// SwiGLU feed-forward (Shazeer 2020): down(silu(gate(x)) * up(x)), no biases.
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

namespace xtrain::model {

class SwiGLUImpl : public torch::nn::Module {
 public:
  SwiGLUImpl(int64_t hidden_size, int64_t intermediate_size);
  torch::Tensor forward(const torch::Tensor& x);
  // gate and up ~ N(0, std^2); down, which writes into the residual stream, ~ N(0, output_std^2).
  void init_weights(double std, double output_std);

  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(SwiGLU);

}  // namespace xtrain::model

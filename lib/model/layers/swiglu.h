// SwiGLU feed-forward (Shazeer 2020): down(silu(gate(x)) * up(x)), no biases. Under tensor
// parallelism gate and up are column-parallel and down row-parallel (split by the
// intermediate dimension), between TensorParallelOps::enter and leave.
#pragma once
#include <cstdint>
#include <string>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "model/layers/linear.h"
#include "model/layers/float8_user.h"
#include "model/layers/fused_kernel_user.h"
#include "model/layers/parameter_init.h"

namespace xtrain::model {

class SwiGLUImpl : public torch::nn::Module, public FusedKernelUser, public Float8User {
 public:
  SwiGLUImpl(int64_t hidden_size, int64_t intermediate_size);
  torch::Tensor forward(const torch::Tensor& x);
  // gate and up ~ N(0, std^2); down, which writes into the residual stream, ~ N(0, output_std^2).
  void describe_init(const std::string& name, double std, double output_std, InitPlan& plan) const;

  Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
  std::shared_ptr<TensorParallelOps> tensor_parallel;
  bool fused = false;  // silu(gate) * up by model/kernels/fused_swiglu.h where it applies (model/kernels/fused_kernels.h)
  void set_fused_kernels(bool on) override { fused = on; }
  void float8_layers(const std::string& name, Float8Layers& layers) override;  // all three projections

 private:
  torch::Tensor gated(const torch::Tensor& x);
};
TORCH_MODULE(SwiGLU);

}  // namespace xtrain::model

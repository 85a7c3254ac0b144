// RMSNorm (Zhang & Sennrich 2019) as Llama uses it: y = w * x / sqrt(mean(x^2) + eps),
// with the statistics computed in fp32 whatever the input dtype, then cast back.
#pragma once
#include <string>
#include <utility>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "model/layers/fused_kernel_user.h"
#include "model/layers/parameter_init.h"
#include "model/layers/tensor_parallel_ops.h"

namespace xtrain::model {

class RMSNormImpl : public torch::nn::Module, public FusedKernelUser {
 public:
  RMSNormImpl(int64_t dim, double eps);
  torch::Tensor forward(const torch::Tensor& x);
  // (residual + update, forward(residual + update)): the add of a residual stream and this norm
  // after it, by one fused kernel where it applies.
  std::pair<torch::Tensor, torch::Tensor> add_and_forward(const torch::Tensor& residual, const torch::Tensor& update);
  void describe_init(const std::string& name, InitPlan& plan) const;  // gains 1

  torch::Tensor weight;
  // Set when this rank sees part of what the norm applies to (part of the sequence, or of the
  // heads): the weight's gradient is then summed over the group (TensorParallelOps::shared).
  std::shared_ptr<TensorParallelOps> partial_gradient;
  // The fused kernel where it applies (model/kernels/fused_rms_norm.h), as the memory policy sets it
  // (memory.fused_kernels); false: the unfused ops, those of transformers' Llama RMSNorm.
  bool fused = false;
  void set_fused_kernels(bool on) override { fused = on; }

 private:
  double eps_;
};
TORCH_MODULE(RMSNorm);

}  // namespace xtrain::model

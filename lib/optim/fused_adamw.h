// AdamW's update of one parameter in one pass over its elements: the decay, both moments and the
// step, each element read and written once, where the multi-tensor ops of optim/adamw.cpp pass
// over the parameter and its state eight times. fp32 on the CPU (vectorised for AVX-512, AVX2
// and plain x86-64), fp32 on CUDA (model/kernels/cuda/fused_kernels_cuda.h). The arithmetic is
// torch.optim.AdamW's; multiply-adds may round once where the separate ops round twice, so the
// results agree with them to a float rounding, not bit for bit.
#pragma once
#include <cstdint>

#include <torch/types.h>

namespace xtrain::optim {

struct AdamWStep {
  double lr, beta1, beta2, eps;
  double weight_decay;  // 0 for a parameter that is not decayed
  int64_t step;         // counts from 1
};

// Whether fused_adamw_step updates these: fp32, one device (CPU, or CUDA in a CUDA build), one
// number of elements, every tensor contiguous.
bool fused_adamw_applies(const torch::Tensor& param, const torch::Tensor& grad, const torch::Tensor& exp_avg,
                         const torch::Tensor& exp_avg_sq);

// p *= 1 - lr wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps), in place.
void fused_adamw_step(const torch::Tensor& param, const torch::Tensor& grad, const torch::Tensor& exp_avg,
                      const torch::Tensor& exp_avg_sq, const AdamWStep& step);

}  // namespace xtrain::optim

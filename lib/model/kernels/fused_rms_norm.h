// RMSNorm as one pass over the rows each way (fp32 on the CPU): y = w * x * r, with
// r = 1 / sqrt(mean(x^2) + eps) per row. The unfused ops read and write every row four times
// forward and save x^2's mean, r and the normalised rows for backward; this kernel saves r only
// (one float per row; x is the residual stream, kept anyway) and recomputes x * r in backward.
// The row sums (x^2, and g*w*x in backward) and the weight's gradient accumulate in fp64, so the
// kernel rounds less than the unfused fp32 ops; the weight's gradient is summed over fixed
// blocks of rows, then over the blocks, so it does not depend on the number of threads.
#pragma once
#include <utility>

#include <torch/types.h>

namespace xtrain::model {

// Whether fused_rms_norm computes this case: w as long as x's last dimension, both fp32 on the
// CPU, or both of one dtype (fp32, bf16, fp16) on one CUDA device (model/kernels/cuda/fused_kernels_cuda.h:
// y rounded as the unfused path rounds it, w * round(x * r)).
bool fused_rms_norm_applies(const torch::Tensor& x, const torch::Tensor& w);

// w * x / sqrt(mean(x^2, -1) + eps), differentiable in x and w.
torch::Tensor fused_rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps);

// Whether fused_add_rms_norm computes this case: fp32 CPU tensors, a of x's shape.
bool fused_add_rms_norm_applies(const torch::Tensor& x, const torch::Tensor& a, const torch::Tensor& w);

// (h, y) with h = x + a and y = fused_rms_norm(h, w, eps), in one pass over the rows each way: a
// decoder layer's residual add and the norm after it. The unfused ops write h, then read it
// back to normalise it, and in backward add the norm's gradient to h's own in a pass of their own.
std::pair<torch::Tensor, torch::Tensor> fused_add_rms_norm(const torch::Tensor& x, const torch::Tensor& a,
                                                           const torch::Tensor& w, double eps);

}  // namespace xtrain::model

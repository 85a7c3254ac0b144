// Rotary position embeddings on q and k in one pass each way (fp32 on the CPU), in the Hugging
// Face rotate_half convention of model/layers/rotary.h. The unfused ops make x * cos, the two halves,
// the negated half, their concatenation and the product with sin: five tensors the size of q and
// five of k written and read again, where this kernel reads each row once and writes it once. It
// saves nothing for backward (the tables are the model's), and rounds as the unfused ops do: the
// same products and sums in the same order, each rounded to fp32 (its file is compiled without
// contracting them into fused multiply-adds), so its results are theirs bit for bit.
#pragma once
#include <utility>

#include <torch/types.h>

namespace xtrain::model {

// Whether fused_rotary computes this case: q [B, Hq, T, D] and k [B, Hk, T, D] with any strides
// but a contiguous last dimension, D even; cos and sin fp32 [T, D]; all fp32 on the CPU, or q and
// k of one dtype (fp32, bf16, fp16) on one CUDA device (model/kernels/cuda/fused_kernels_cuda.h, which
// rounds the tables to that dtype as apply_rotary does).
bool fused_rotary_applies(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& cos,
                          const torch::Tensor& sin);

// (apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)), differentiable in q and k; each output
// has its input's strides.
std::pair<torch::Tensor, torch::Tensor> fused_rotary(const torch::Tensor& q, const torch::Tensor& k,
                                                     const torch::Tensor& cos, const torch::Tensor& sin);

}  // namespace xtrain::model

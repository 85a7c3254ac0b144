// SwiGLU's elementwise part, silu(gate) * up, as one pass each way (fp32 on the CPU). The unfused
// ops save gate, silu(gate) and up for backward; this kernel saves gate and up, which it reads
// anyway, and recomputes the sigmoid in backward: one [tokens, intermediate] tensor less per MLP.
// silu(x) = x / (1 + e^-x) with cpu::vector_exp, within a few float roundings of LibTorch's.
#pragma once
#include <torch/types.h>

namespace xtrain::model {

// Whether fused_swiglu computes this case: gate and up of one shape, fp32 on the CPU or of one
// dtype (fp32, bf16, fp16) on one CUDA device (model/kernels/cuda/fused_kernels_cuda.h).
bool fused_swiglu_applies(const torch::Tensor& gate, const torch::Tensor& up);

// silu(gate) * up, differentiable in both.
torch::Tensor fused_swiglu(const torch::Tensor& gate, const torch::Tensor& up);

}  // namespace xtrain::model

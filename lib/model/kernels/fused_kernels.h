// Where the fused kernels run: the CPU versions take fp32 CPU tensors, the CUDA versions
// (model/kernels/cuda/fused_kernels_cuda.h) what cuda_fused_kernel_takes says. Which modules use
// them is model/kernel_choice.h's.
#pragma once
#include <torch/types.h>

namespace xtrain::model {

// Whether the CUDA versions take `t`: a CUDA tensor of fp32, bf16 or fp16 in a build with the
// CUDA paths.
bool cuda_fused_kernel_takes(const torch::Tensor& t);

}  // namespace xtrain::model

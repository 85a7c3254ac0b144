// The choice between the fused kernels (model/kernels/fused_*.h: one pass each way over the
// elementwise work between the matmuls, recomputing in backward what the unfused ops would save)
// and the unfused LibTorch ops, which compute what transformers' modules do, op for op. Modules
// start unfused; the memory policy turns the kernels on (memory.fused_kernels). Each module still
// takes the unfused ops for a tensor its kernel does not cover (a dtype or device without one).
#pragma once
#include <torch/nn/module.h>

namespace xtrain::model {

// Sets every module under `root` (itself included) to use its fused kernel, or not.
void use_fused_kernels(torch::nn::Module& root, bool fused);

}  // namespace xtrain::model

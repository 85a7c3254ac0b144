// The choice between the fused kernels (model/kernels/fused_*.h: one pass each way over the
// elementwise work between the matmuls, recomputing in backward what the unfused ops would save)
// and the unfused LibTorch ops, which compute what transformers' modules do, op for op. Modules
// start unfused; the memory policy turns the kernels on (memory.fused_kernels). Each module still
// takes the unfused ops for a tensor its kernel does not cover (a dtype or device without one).
// A module with a fused path implements FusedKernelUser (model/layers/fused_kernel_user.h), and
// a model or layer passes the choice to its parts, which it knows by type.
#pragma once
#include "model/layers/fused_kernel_user.h"

namespace xtrain::model {

// Sets `root` and every part of it with a fused path to use its fused kernel, or not.
void use_fused_kernels(FusedKernelUser& root, bool fused);

}  // namespace xtrain::model

// Global-norm gradient clipping, computed like torch.nn.utils.clip_grad_norm_.
#pragma once
#include <vector>

#include <torch/types.h>

namespace xtrain::optim {

// Returns the global L2 norm of all gradients before clipping; scales them so that the
// norm is at most max_norm when max_norm > 0.
double clip_grad_norm(const std::vector<torch::Tensor>& parameters, double max_norm);

}  // namespace xtrain::optim

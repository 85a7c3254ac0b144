// How a block's auxiliary loss gets its gradient without leaving the block: attach_loss(x, loss,
// weight) is x, and its backward also gives `loss` the gradient `weight` (as if `weight * loss`
// were added to the objective). The loss's gradient is thus computed inside the block's own
// backward, which is where FSDP has the block's parameters gathered, where recompute replays
// the block, and what a pipeline stage runs; an auxiliary loss computed outside the block
// would reach its parameters after they were released.
#pragma once
#include <torch/types.h>

namespace xtrain::model {

torch::Tensor attach_loss(const torch::Tensor& x, const torch::Tensor& loss, double weight);

// The same for a loss sum(coefficients * terms) whose coefficients are known only after the
// forward (a loss over every layer's routing, whose gradient in one layer depends on all of
// them): `coefficients` is read when backward runs, so its owner fills it in place in between.
torch::Tensor attach_loss_terms(const torch::Tensor& x, const torch::Tensor& terms, const torch::Tensor& coefficients,
                                double weight);

}  // namespace xtrain::model

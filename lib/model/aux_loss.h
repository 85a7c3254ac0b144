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

}  // namespace xtrain::model

// Running a sharded unit so that its parameters are present exactly while it computes: the unit
// runs on a detached copy of its input, inside hooks that gather its parameters before forward
// and free them after; its backward is one autograd node that calls the backward hooks (gather
// again, prepare the full gradient buffers), runs the inner graph's backward, and calls the
// after-backward hook (hand the gradients to their reduction). Without grad mode only the
// forward hooks run. The input may be undefined (a unit that reads only the batch, such as a
// pipeline's first chunk): its output then has no gradient to pass on.
#pragma once
#include <functional>

#include <torch/types.h>

namespace xtrain::parallel {

struct UnitHooks {
  std::function<void()> before_forward, after_forward, before_backward, after_backward;
};

using UnitFn = std::function<torch::Tensor(const torch::Tensor&)>;

torch::Tensor run_sharded_unit(const UnitHooks& hooks, const torch::Tensor& x, const UnitFn& fn);

}  // namespace xtrain::parallel

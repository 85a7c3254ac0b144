// Activation recompute (gradient checkpointing): run a function without keeping the
// activations autograd would save, and re-run it in backward to get them back. Only the
// function's inputs are kept, optionally in host memory through an ActivationOffloader.
// Gradients are bit-identical to the plain run: backward replays the same operations on the
// same inputs. Parameters used inside `fn` receive their gradients (accumulated into .grad)
// during the replay.
#pragma once
#include <functional>
#include <vector>

#include <torch/types.h>

#include "memory/activation_offload.h"

namespace xtrain::memory {

using RecomputeFn = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;

// Returns fn(inputs). When grad mode is on, the result's backward recomputes fn. With an
// offloader (one input only), that input is kept in host memory until backward needs it.
torch::Tensor recompute(RecomputeFn fn, const std::vector<torch::Tensor>& inputs,
                        ActivationOffloader* offloader = nullptr);

}  // namespace xtrain::memory

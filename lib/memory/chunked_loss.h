// Fused output projection + cross-entropy that never materialises the [N, V] logits.
//
// chunked_cross_entropy(hidden, weight, targets) == cross_entropy(hidden @ weight^T, targets)
// (+ bias, the output projection's [V], when given; encoders' heads have one)
// (mean over targets != ignore_index; 0 when every target is ignored). The forward pass walks
// the rows in chunks of chunk_tokens: for each chunk it forms the logits in fp32 (fp64 for
// fp64 inputs; under bf16 autocast from bf16 matmul operands), takes the loss, turns the logits
// in place into d loss / d logits, and folds that into the gradients of hidden ([N, H]) and
// weight ([V, H], accumulated in fp32). Backward only scales those saved gradients by
// grad_output. Peak extra memory is one [chunk, V] buffer plus the two gradients, instead of a
// few [N, V] tensors (the same scheme as Liger's FusedLinearCrossEntropy). Gradients are
// computed only for inputs that need them.
//
// The result is a scalar in the compute dtype (fp32, or fp64 for fp64 inputs). Not twice
// differentiable.
//
// Where the weight's gradient goes: see WeightGrad.
// How many tokens a chunk takes for the recipe's memory.chunked_loss: layout/loss_chunking.h.
#pragma once
#include <cstdint>

#include <torch/types.h>

#include "model/layers/tensor_parallel_ops.h"

namespace xtrain::memory {

// Where the weight's gradient goes. The last two are for a backward() pass, never autograd::grad,
// and hand autograd no gradient for the weight, as Megatron's gradient-accumulation fusion does:
// a tied table's engine would otherwise hold the [V, H] gradient until the embedding lookup's
// joins it at the end of backward.
enum class WeightGrad {
  to_autograd,
  // Added in backward to the weight's .grad when that exists.
  into_existing_grad,
  // Summed into the weight's .grad during forward and scaled there by backward, when .grad
  // exists: the caller guarantees that it holds zeros and that nothing else writes to it before
  // this loss's backward (an FSDP unit's fresh full gradient). The gradient is then never held
  // twice, not even between forward and backward.
  into_fresh_grad,
};

struct VocabParallel {
  model::TensorParallelOps* ops = nullptr;  // null: the weight is the whole vocabulary
  int64_t first = 0;
};

// hidden: [N, H] any float dtype; weight: [V, H] (the output projection); targets: [N] int64.
torch::Tensor chunked_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& weight,
                                    const torch::Tensor& targets, int64_t chunk_tokens,
                                    int64_t ignore_index = -100, const VocabParallel& vocab = {},
                                    const torch::Tensor& bias = {}, WeightGrad weight_grad = WeightGrad::to_autograd);

}  // namespace xtrain::memory

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
// Vocabulary-parallel (Megatron's cross-entropy over a tensor-parallel group): weight holds rows
// [vocab.first, vocab.first + V_r) of the whole output projection on each rank of vocab.ops's
// group, and hidden is the same on every rank. Per chunk, the rows' maxima are all-reduced,
// then their sums of exponentials and target logits (each held by one rank) in one all-reduce;
// the loss is the whole vocabulary's on every rank, and the gradients are this rank's: its
// weight rows', and its partial of hidden's, which the caller sums over the group (the model
// passes hidden through TensorParallelOps::enter).
#pragma once
#include <cstdint>

#include <torch/types.h>

#include "model/tensor_parallel_ops.h"

namespace xtrain::memory {

struct VocabParallel {
  model::TensorParallelOps* ops = nullptr;  // null: the weight is the whole vocabulary
  int64_t first = 0;
};

// hidden: [N, H] any float dtype; weight: [V, H] (the output projection); targets: [N] int64.
torch::Tensor chunked_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& weight,
                                    const torch::Tensor& targets, int64_t chunk_tokens,
                                    int64_t ignore_index = -100, const VocabParallel& vocab = {},
                                    const torch::Tensor& bias = {});

// Largest chunk whose fp32 logits and one same-sized temporary fit in budget_bytes, clamped to
// [1, num_tokens].
int64_t auto_chunk_tokens(int64_t vocab_size, int64_t num_tokens, int64_t budget_bytes = 256 << 20);

}  // namespace xtrain::memory

// Ulysses attention (DeepSpeed's sequence parallelism): an all-to-all over a context-parallel
// group turns each rank's sequence spans of every head into every token of 1/cp of the heads,
// the inner kernel attends over the whole row, and the reverse all-to-all turns the output
// back. Both exchanges are autograd functions (parallel/autograd_collectives.h), so backward
// runs the same two in reverse.
//
// q: [B, H, T_local, D]; k: [B, KV, T_local, D]; v: [B, KV, T_local, Dv]; H and KV must divide
// by the group's size (recipes are checked before this). layout.context says which tokens each
// rank holds. The inner kernel gets the variant with its sinks cut to this rank's heads (rank r
// attends heads r*H/cp .. (r+1)*H/cp - 1): the sinks' gradient on each rank is then its heads'
// whole-row gradient, zero elsewhere, and the context ranks' sum is the full one.
#pragma once
#include <memory>

#include <torch/types.h>

#include "model/attention/attention.h"
#include "parallel/comm.h"

namespace xtrain::parallel {

// `inner`: the kernel for the whole row (empty: model::causal_attention).
torch::Tensor ulysses_attention(const std::shared_ptr<Comm>& comm, const model::AttentionKernel& inner,
                                const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const model::SequenceLayout& layout, const model::AttentionVariant& variant = {});

}  // namespace xtrain::parallel

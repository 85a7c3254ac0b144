// Tensor parallelism's building blocks (Megatron-core's tensor_parallel/mappings.py and layers):
// the conjugate collectives over a tensor-parallel group as autograd functions, and the
// column- and row-parallel linear layers that compose them. Each rank holds a slice of a
// weight; the collectives make the slices compute what the whole weight computes, forward and
// backward.
//
//   copy_to_tensor_parallel      identity              backward: all-reduce (sum)
//   reduce_from_tensor_parallel  all-reduce (sum)      backward: identity
//   gather_from_tensor_parallel  all-gather, last dim  backward: this rank's slice
//   scatter_to_tensor_parallel   this rank's slice     backward: all-gather, last dim
// and sequence parallelism's pair, along the sequence dimension `dim`:
//   gather_sequence              all-gather            backward: reduce-scatter (sum)
//   reduce_scatter_sequence      reduce-scatter (sum)  backward: all-gather
//   gather_replicated_sequence   all-gather            backward: this rank's part (for a
//                                computation every rank repeats alike on the whole sequence)
#pragma once
#include <cstdint>
#include <memory>

#include <torch/types.h>

#include "parallel/autograd_collectives.h"
#include "parallel/comm.h"

namespace xtrain::parallel {

torch::Tensor copy_to_tensor_parallel(const std::shared_ptr<Comm>& group, const torch::Tensor& x);
torch::Tensor reduce_from_tensor_parallel(const std::shared_ptr<Comm>& group, const torch::Tensor& x);
torch::Tensor gather_from_tensor_parallel(const std::shared_ptr<Comm>& group, const torch::Tensor& x);
torch::Tensor scatter_to_tensor_parallel(const std::shared_ptr<Comm>& group, const torch::Tensor& x);
torch::Tensor gather_sequence(const std::shared_ptr<Comm>& group, const torch::Tensor& x, int64_t dim);
torch::Tensor reduce_scatter_sequence(const std::shared_ptr<Comm>& group, const torch::Tensor& x, int64_t dim);
torch::Tensor gather_replicated_sequence(const std::shared_ptr<Comm>& group, const torch::Tensor& x, int64_t dim);

// y = x W^T with W split by output rows over the group: weight is this rank's [out / tp, in].
// The input is whole on every rank (or, with sequence_dim >= 0, this rank's part of the
// sequence, gathered first); the output is this rank's columns, or all of them with
// gather_output.
torch::Tensor column_parallel_linear(const std::shared_ptr<Comm>& group, const torch::Tensor& x,
                                     const torch::Tensor& weight, bool gather_output = false,
                                     int64_t sequence_dim = -1);
// y = x W^T with W split by input columns: weight is this rank's [out, in / tp] and x this rank's
// [..., in / tp] (a column-parallel layer's output). The partial products are summed over the
// group, or with sequence_dim >= 0 reduce-scattered along the sequence.
torch::Tensor row_parallel_linear(const std::shared_ptr<Comm>& group, const torch::Tensor& x,
                                  const torch::Tensor& weight, int64_t sequence_dim = -1);

}  // namespace xtrain::parallel

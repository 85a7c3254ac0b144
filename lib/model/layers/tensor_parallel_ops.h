// What a model's layers need of tensor parallelism, and nothing of how it is done: Megatron's
// conjugate collectives over the tensor-parallel group (parallel/tensor_parallel.h implements
// them over a Comm) and which share of a split dimension a rank holds. A layer holds a pointer
// to one; null means no tensor parallelism, and the layer computes as it always did.
//
//   enter(x)  before column-parallel layers: x is whole on every rank (identity; backward sums
//             the ranks' partial input gradients) or, with sequence parallelism, this rank's
//             part of the sequence, dimension 1 (all-gathered; backward reduce-scatters).
//   leave(y)  after row-parallel layers: the ranks' partial sums, added (all-reduce) or, with
//             sequence parallelism, reduce-scattered along the sequence.
//   shared(w) a weight replicated over the group whose gradient on each rank is partial (a
//             norm applied to part of the sequence or part of the heads): identity; backward
//             all-reduces the gradient.
//   whole(x)  x whole on every rank for a computation every rank repeats alike on all of it (a
//             mixture of experts' router): identity, or with sequence parallelism the sequence
//             all-gathered, whose backward keeps this rank's part of the gradient (each rank's is
//             the same whole one, so summing them would count it tp times).
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

namespace xtrain::model {

class TensorParallelOps {
 public:
  virtual ~TensorParallelOps() = default;
  virtual int64_t rank() const = 0;
  virtual int64_t size() const = 0;
  virtual bool sequence_parallel() const = 0;

  virtual torch::Tensor enter(const torch::Tensor& x) = 0;
  virtual torch::Tensor leave(const torch::Tensor& y) = 0;
  virtual torch::Tensor shared(const torch::Tensor& w) = 0;
  virtual torch::Tensor whole(const torch::Tensor& x) = 0;
  // In place and outside autograd: the statistics of a vocabulary-parallel loss.
  virtual void all_reduce_sum(torch::Tensor& t) = 0;
  virtual void all_reduce_max(torch::Tensor& t) = 0;
  // [..., sizes[r]] on rank r -> [..., sum of sizes] on every rank, outside autograd (logits).
  virtual torch::Tensor gather_last_dim(const torch::Tensor& x, const std::vector<int64_t>& sizes) = 0;
};

// The share [first, first + count) of a dimension of `total` that rank `rank` of `ranks` holds:
// ceil(total / ranks) each, so that a vocabulary that does not divide (257 over 2) splits with
// the last rank holding fewer rows and no padding row ever exists.
struct SplitShare {
  int64_t first = 0, count = 0;
};
inline SplitShare split_share(int64_t total, int64_t rank, int64_t ranks) {
  const int64_t each = (total + ranks - 1) / ranks;
  const int64_t first = std::min(total, rank * each);
  return {first, std::min(total, first + each) - first};
}

// A parameter's slice on one rank: its share of dimension `dim`.
struct TensorSlice {
  int64_t dim = 0;
  SplitShare share;
};
// A model's tensor-parallel plan for one rank, by parameter name; a parameter absent from it is
// replicated (whole on every rank).
using TensorParallelPlan = std::map<std::string, TensorSlice>;

}  // namespace xtrain::model

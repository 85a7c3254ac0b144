// The compressed all-reduce of 1-bit Adam (Tang et al. 2021, as DeepSpeed's
// runtime/comm/compressed.py does it), over a Comm of W ranks, for a fixed list of tensors.
// Each tensor is zero-padded to a multiple of 8 W elements and split into W chunks, chunk r
// owned by rank r. Per tensor, a rank adds its worker error, compresses to signs (x >= 0 is +1)
// and one scale, the l2 norm / sqrt(numel), and keeps what that lost as its new worker error;
// the signs travel as bits (uint8, 8 signs a byte, the first element in the high bit) in one
// all-to-all, the scales in one all-gather. Rank r averages every rank's chunk r, adds its
// server error, compresses again (a scale per chunk) and keeps the loss as its server error;
// one all-gather of bits and one of scales give every rank the same result. Four collectives
// a call, whatever the number of tensors: 2 (W-1)/W n/8 bytes each way for n elements, where a
// fp32 ring all-reduce moves 2 (W-1)/W 4n.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "optim/momentum_exchange.h"
#include "parallel/comm.h"

namespace xtrain::parallel {

// Signs of x (x >= 0 as 1) as bytes, 8 to a byte, the first in the high bit; numel % 8 == 0.
torch::Tensor pack_signs(const torch::Tensor& x);
// The inverse, as +1 / -1 floats.
torch::Tensor unpack_signs(const torch::Tensor& bytes);

class CompressedAllReduce final : public optim::MomentumExchange {
 public:
  // sizes: the number of elements of each tensor average() will be given; errors start at zero.
  CompressedAllReduce(std::shared_ptr<Comm> comm, std::vector<int64_t> sizes, torch::TensorOptions options);

  int64_t replicas() const override { return comm_->size(); }
  int64_t replica_rank() const override { return comm_->rank(); }
  void average(const std::vector<torch::Tensor>& tensors) override;
  // "worker_error.<i>" [padded_i], "server_error.<i>" [padded_i / W].
  std::map<std::string, torch::Tensor> state() const override;
  void load_state(const std::map<std::string, torch::Tensor>& state) override;

 private:
  void expand(const torch::Tensor& bytes, const torch::Tensor& scales, const std::vector<torch::Tensor>& tensors) const;

  std::shared_ptr<Comm> comm_;
  std::vector<int64_t> sizes_, chunks_;  // per tensor: elements, and elements of each chunk
  int64_t chunk_total_ = 0;              // sum of chunks_: a multiple of 8
  std::vector<torch::Tensor> worker_error_, server_error_;
};

}  // namespace xtrain::parallel

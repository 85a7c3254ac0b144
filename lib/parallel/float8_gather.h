// FP8 all-gather of an FSDP unit's FP8 weights (precision.fp8_all_gather; torchtitan's
// enable_fsdp_float8_all_gather): each rank sends its part of those weights as fp8 bytes, the
// rest of its shard (norms, biases, other weights) as fp32, and every rank rebuilds the full
// buffer with each FP8 weight dequantized from the gathered bytes.
//
// The scales are the whole tensor's, not the shard's: every rank takes the amax of each block
// (model/layers/float8.h) over its part, the ranks' amaxes are gathered and maxed (one small collective
// per unit), so they are the scales the one-process run computes from the fp32 weight. They are
// registered on the weights (model::register_gathered_float8_scales) while gathered, and the
// layer quantizing the dequantized weight with them recovers exactly the gathered bytes: the
// FP8 forward and input gradient are the one-process run's, bit for bit.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "model/layers/float8.h"
#include "parallel/comm.h"

namespace xtrain::parallel {

class Float8Gather {
 public:
  // One FP8 weight of the unit: [R, C] or a stack of experts [E, R, C], at `offset` of the
  // unit's flat buffer.
  struct Weight {
    torch::Tensor param;
    std::vector<int64_t> shape;
    int64_t offset = 0, numel = 0;
    model::ScaleBlock block;
  };

  // `padded`: the unit's flat buffer, split evenly over `group`.
  Float8Gather(std::vector<Weight> weights, int64_t padded, std::shared_ptr<Comm> group);

  // Reduces the scales (blocking: a few floats), quantizes this rank's shard and starts the
  // gathers; `full` [padded] fp32 receives the result in finish().
  PendingCollective start(const torch::Tensor& shard);
  // After the pending gathers complete: fills `full` and registers the weights' scales.
  void finish(torch::Tensor& full);
  // Unregisters the scales (the unit reshards).
  void release();

  // Bytes one gather brings from the other ranks: fp8 bytes, fp32 rest, and the amaxes.
  int64_t received_bytes() const;

 private:
  // A run of consecutive flat elements of one rank's shard: part of FP8 weight `weight` (its
  // elements [first, first + length)), or of the fp32 rest (weight -1).
  struct Run {
    int64_t flat = 0, length = 0;
    int64_t weight = -1, first = 0;
  };
  torch::Tensor block_ids(const Weight& weight, int64_t first, int64_t length) const;
  int64_t blocks_of(const Weight& weight) const;

  std::vector<Weight> weights_;
  std::shared_ptr<Comm> group_;
  int64_t shard_numel_ = 0;
  std::vector<std::vector<Run>> runs_;  // per rank of the group
  int64_t fp8_per_rank_ = 0, rest_per_rank_ = 0, amax_count_ = 0;
  std::vector<int64_t> amax_offsets_;  // each weight's first block in the amax vector
  torch::Tensor scales_;               // [amax_count_] float32, of the gather in flight
  torch::Tensor fp8_out_, rest_out_, amax_out_;
};

}  // namespace xtrain::parallel

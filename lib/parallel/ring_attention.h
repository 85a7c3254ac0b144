// Ring attention (context parallelism): each rank of a group holds some spans of every row
// (model::ContextShard) with their q, k and v; the k/v blocks travel around the ring, each
// rank's next block arriving while it attends to the block in hand, and an online softmax
// merges the blocks into the attention over the whole row. Backward sends the same blocks
// round again, each with its dk/dv accumulator, which arrives home after a full turn. Block
// pairs with nothing to see (all keys in the queries' future or in other documents) are
// skipped without computing.
//
// q: [B, H, T_local, D]; k: [B, KV, T_local, D]; v: [B, KV, T_local, Dv] (H a multiple of KV),
// rotated to their row positions; layout.context says which tokens each rank holds and
// layout.cu_seqlens the row's documents. Memory is linear in T: forward saves q, k, v, the
// output and its log-sum-exp.
//
// The variant: the scale goes to every block pair; a window skips the pairs (and tiles) wholly
// before it; the sinks join each row's softmax once, merged into the finished (out, lse) after
// the last step, and their gradient is this rank's rows' share (summed over the context ranks
// with the other parameters' gradients). Block pairs go through the CUDA flash kernel when it
// takes them all (one sequence per row, bf16/fp16, Dv = D, no window), through tiles otherwise.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>

#include <torch/types.h>

#include "model/attention/attention.h"
#include "model/layers/sequence_layout.h"
#include "parallel/comm.h"

namespace xtrain::parallel {

// Where the ring's time goes, forward and backward: attending to blocks, and blocked on a
// block's transfer after the attention that should have hidden it (waits: the transfers waited on).
struct RingTimes {
  std::atomic<int64_t> attention_ns{0};
  std::atomic<int64_t> blocked_ns{0};
  std::atomic<int64_t> waits{0};
  double attention_seconds() const { return static_cast<double>(attention_ns.load()) * 1e-9; }
  double blocked_seconds() const { return static_cast<double>(blocked_ns.load()) * 1e-9; }
};

// block_size: the tile edge within each block pair. `times`, when given, is added to.
torch::Tensor ring_attention(const std::shared_ptr<Comm>& comm, const torch::Tensor& q, const torch::Tensor& k,
                             const torch::Tensor& v, const model::SequenceLayout& layout,
                             const model::AttentionVariant& variant = {}, int64_t block_size = 256,
                             std::shared_ptr<RingTimes> times = nullptr);

}  // namespace xtrain::parallel

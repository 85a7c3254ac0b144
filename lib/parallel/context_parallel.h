// Context parallelism: each micro batch's rows split along the sequence over the cp ranks of
// the mesh, and attention that sees the whole row (parallel/ring_attention.h,
// parallel/ulysses_attention.h). Everything else in a decoder is token-local, and the loss of
// each rank's targets, weighed by the global target count, sums over the ranks like the data
// ranks' (train/micro_batch_weight.h).
//
// The split is head-tail: a row cut into 2 x cp chunks gives rank r chunks r and 2cp - 1 - r,
// so each rank has an early and a late part and the causal work of one sequence is even.
// Packed rows of documents of uneven lengths can do better: balancing cuts the row into finer
// chunks and deals them out, as many to each rank, heaviest first to the rank with the least
// causal work so far (longest-processing-time first), and keeps whichever split has the lower
// maximum. The causal work of a token is the keys it sees: its position in its document + 1.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "memory/memory_policy.h"
#include "model/layers/sequence_layout.h"
#include "parallel/device_mesh.h"
#include "parallel/ring_attention.h"

namespace xtrain::parallel {

// The split of a row of `length` tokens (a multiple of 2 x ranks) with documents `bounds` (its
// cu_seqlens; empty: one sequence) over `ranks`, seen from `rank`.
std::shared_ptr<const model::ContextShard> plan_context_shard(int64_t length, const std::vector<int64_t>& bounds,
                                                              int64_t ranks, int64_t rank, bool balance);

// The causal attention work of each rank's tokens under `shard` (bounds as above).
std::vector<double> context_rank_costs(const model::ContextShard& shard, const std::vector<int64_t>& bounds);

// What parallelize() wraps each layer's attention kernel with when cp > 1: ring attention over
// the mesh's cp group (the chosen kernel's tiles are its own), or Ulysses around the chosen
// kernel. `times` collects the ring's attention and blocked time.
memory::KernelWrap context_parallel_kernel(const DeviceMesh& mesh, ContextKind kind, int64_t block_size,
                                           std::shared_ptr<RingTimes> times);

}  // namespace xtrain::parallel

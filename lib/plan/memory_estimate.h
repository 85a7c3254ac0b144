// The memory one rank holds at its peak, term by term, for a recipe on a cluster layout:
//   model state     fp32 master weights, fp32 gradients and AdamW's two fp32 moments (16 bytes
//                   a parameter), sharded over fsdp x cp (dense) and the expert shards (experts);
//   gathered units  FSDP's full parameters and gradients of the unit running and the one
//                   prefetched (fp32, 2 x 8 bytes a parameter), and the head's unit;
//   activations     what backward keeps of each layer a micro batch passed through, by the
//                   recompute, offload, sequence and context parallelism and expert choices,
//                   times the micro batches a pipeline stage holds at once (its schedule);
//   logits          the output projection and loss (memory.chunked_loss bounds them);
//   runtime         the process's fixed footprint (the hardware profile's).
// Each term says which option shrinks it, for the plan of a recipe that does not fit.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/recipe.h"
#include "plan/cluster_layout.h"
#include "plan/hardware_profile.h"
#include "plan/model_census.h"
#include "plan/step_time_estimate.h"

namespace xtrain::plan {

struct MemoryTerm {
  std::string name;
  double bytes = 0;
  std::string detail;  // how it was counted
  std::string shrink;  // the options that make it smaller
};

struct MemoryEstimate {
  std::vector<MemoryTerm> terms;
  int64_t pipeline_rank = 0;  // the fullest pipeline stage's, of which these are the terms
  int64_t pipeline_ranks = 1;
  double total() const;
  const MemoryTerm& largest() const;
};

// Bytes of one activation or logit element in the recipe's compute dtype (layout::activation_bytes).
double element_bytes(const config::Recipe& recipe);

// `engine`: how another engine differs from xtrain (of its fields, memory reads the recompute
// policy: torchtitan's per-op selective recompute keeps a block's input, attention's output and
// every odd matrix product's output).
MemoryEstimate estimate_memory(const ModelCensus& census, const config::Recipe& recipe, const ClusterLayout& layout,
                               const HardwareProfile& hardware, const CommunicationOverlap& engine = {});

}  // namespace xtrain::plan

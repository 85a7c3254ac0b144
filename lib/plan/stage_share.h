// StageShare: what one rank holds of the model and computes per token, for the pipeline rank
// that holds the most (its chunks as xtrain cuts the model, config/pipeline_layout.h), after
// tensor parallelism splits the matrices and expert parallelism the experts.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "plan/cluster_layout.h"
#include "plan/model_census.h"

namespace xtrain::plan {

struct StageShare {
  double dense = 0;            // this rank's parameters outside the routed experts
  double experts = 0;          // this rank's routed experts' parameters
  double token_matrices = 0;   // matrix parameters one token passes through here (its GEMM FLOPs / 2)
  double expert_matrices = 0;  // of which in routed experts
  double largest_layer = 0;    // the largest layer's parameters here (an FSDP unit)
  double head = 0;             // the output projection's parameters here (0 off the last stage)
  int64_t layers = 0, moe_layers = 0;
  int64_t pipeline_rank = 0;
  // The layers [first, last) of each of this rank's chunks, by virtual index.
  std::vector<std::pair<int64_t, int64_t>> chunk_layers;
  // Every stage's together, on a tp rank: what the pipeline's other stages compute too.
  double all_token_matrices = 0;
  int64_t all_layers = 0;
};

// The pipeline rank that holds the most parameters (with every stage's compute summed in).
StageShare stage_share(const ModelCensus& census, const ClusterLayout& layout);
// Pipeline rank `rank`'s share alone (its all_* fields unset).
StageShare pipeline_rank_share(const ModelCensus& census, const ClusterLayout& layout, int64_t rank);

}  // namespace xtrain::plan

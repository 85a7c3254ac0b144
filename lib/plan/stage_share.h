// StageShare: what one rank holds of the model and computes per token, for the pipeline stage
// that holds the most (the first, with the embedding, or the last, with the head), after tensor
// parallelism splits the matrices and expert parallelism the experts.
#pragma once
#include <cstdint>

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
  // Every stage's together, on a tp rank: what the pipeline's other stages compute too.
  double all_token_matrices = 0;
  int64_t all_layers = 0;
};

StageShare stage_share(const ModelCensus& census, const ClusterLayout& layout);

}  // namespace xtrain::plan

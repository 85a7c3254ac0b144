// --search: the layouts a recipe could train with on a cluster, each planned, those that fit
// ranked by tokens per second per device. Candidates vary tp (inside a node, dividing the heads),
// pp (dividing the layers), cp (long sequences), ep (dividing the experts and the data ranks),
// FSDP over every data rank or HSDP with a node's ranks sharding, recompute, the micro batch
// size and the pipeline schedule; the recipe's other options stay as they are.
#pragma once
#include <vector>

#include "config/recipe.h"
#include "plan/cluster_layout.h"
#include "plan/hardware_profile.h"
#include "plan/memory_estimate.h"
#include "plan/model_census.h"
#include "plan/step_time_estimate.h"

namespace xtrain::plan {

struct LayoutCandidate {
  config::Recipe recipe;  // with the candidate's parallel and memory options
  ClusterLayout layout;
  MemoryEstimate memory;
  StepTimeEstimate time;
};

// The fitting candidates, fastest first (at most `keep`), and how many were tried.
std::vector<LayoutCandidate> search_layouts(const ModelCensus& census, const config::Recipe& recipe, int64_t nodes,
                                            int64_t gpus_per_node, const HardwareProfile& hardware, size_t keep,
                                            int64_t* tried = nullptr);

}  // namespace xtrain::plan

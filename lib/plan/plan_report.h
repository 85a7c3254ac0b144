// `xtrain plan`: a recipe's memory and step time on a cluster (plan/memory_estimate.h,
// plan/step_time_estimate.h) printed as two tables, and with --search the layouts that fit,
// fastest first (plan/layout_search.h). A plan that does not fit says by how much, which term is
// the largest, and which options shrink it.
#pragma once
#include <cstdint>
#include <string>

#include "config/recipe.h"
#include "plan/model_census.h"
#include "plan/step_time_estimate.h"

namespace xtrain::plan {

struct PlanRequest {
  int64_t nodes = 1, gpus_per_node = 8;
  std::string hardware = "h100-sxm";
  bool search = false;
  int64_t top = 3;  // layouts --search prints
  CommunicationOverlap overlap;  // the engine's, where it is not xtrain (published runs)
  std::string attention_kernel;  // the engine's kernel table, where it is not the profile's own
  std::string fp8_linear;        // the engine's FP8 linear layers (a table of fp8_linear_speedups), where published
};

// Prints the plan to stdout; returns whether the recipe's own layout fits in the device memory.
bool print_plan(const ModelCensus& census, const config::Recipe& recipe, const PlanRequest& request);

}  // namespace xtrain::plan

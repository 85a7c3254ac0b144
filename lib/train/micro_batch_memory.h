// Refuses a micro batch that cannot fit before the first step, instead of running into the
// allocator's out-of-memory error minutes later. The figure is a lower bound of what one micro
// batch keeps alive between its forward and its backward on one rank: every block's input, which
// backward needs under any recompute setting, and the logits when the loss is not chunked. A
// micro batch above the bound cannot fit; one below may still not (the planner refines this).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "config/recipe.h"

namespace xtrain::train {

struct RankShape {
  int64_t tp = 1, pp = 1;   // layers split over pp stages; tokens over tp under sequence parallel
  int64_t data_ranks = 1;  // dp x fsdp: the global batch is split over these
  int64_t ranks_on_node = 1;
};

// The bound for one sequence of data.seq_len tokens, in bytes.
int64_t sequence_bytes_lower_bound(const config::Recipe& recipe, const RankShape& shape);

// The problem with train.micro_batch_size when available_bytes (this rank's share of the memory
// left; < 0 when unknown, described by memory_name) is below the bound, naming the micro batch that
// would fit; nullopt when it fits or nothing is known.
std::optional<std::string> micro_batch_memory_problem(const config::Recipe& recipe, const RankShape& shape,
                                                      int64_t available_bytes, const std::string& memory_name);

}  // namespace xtrain::train

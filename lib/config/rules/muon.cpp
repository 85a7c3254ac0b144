// Muon orthogonalises each whole weight matrix: the layouts whose pieces it can assemble.
#include <tuple>

#include <fmt/format.h>

#include "config/recipe_rule.h"

namespace xtrain::config::rules {

void muon(const RuleContext& c) {
  if (c.recipe.optim.name != Optimizer::muon) return;
  const auto& p = c.recipe.parallel;
  // FSDP's pieces are stretches of one flattening over the shard group, which Muon assembles;
  // tensor and expert parallelism cut matrices into boxes held by other groups, not yet assembled.
  for (const auto& [key, degree, why] :
       {std::tuple<const char*, int64_t, const char*>{"parallel.tp", p.tp, "tensor-parallel slices"},
        {"parallel.ep", p.ep, "expert-parallel ranks"}})
    if (degree > 1)
      c.refuse(key, fmt::format("{}: optim.name muon orthogonalises each whole weight matrix, and assembles it from "
                                "FSDP's shards only, not from {}; leave it at 1 (parallel.fsdp, parallel.dp, "
                                "parallel.pp and parallel.cp work) or use optim.name adamw",
                                degree, why));
}

}  // namespace xtrain::config::rules

// 1-bit Adam compresses what the data-parallel replicas exchange; the layouts it is exact on.
#include <tuple>

#include <fmt/format.h>

#include "config/recipe_rule.h"

namespace xtrain::config::rules {

void onebit_adam(const RuleContext& c) {
  if (c.recipe.optim.name != Optimizer::onebit_adam) return;
  const auto& p = c.recipe.parallel;
  if (p.dp == 1)
    c.refuse("parallel.dp",
             "1: optim.name onebit_adam compresses the momentum exchanged between data-parallel replicas, and there "
             "is one. Pure FSDP's reduce-scatter already moves each gradient element once and its optimizer state is "
             "sharded, so there is nothing to replace: use parallel.dp above 1 (DDP, or HSDP with parallel.fsdp)");
  for (const auto& [key, degree, why] :
       {std::tuple<const char*, int64_t, const char*>{"parallel.tp", p.tp, "tensor-parallel slices"},
        {"parallel.pp", p.pp, "pipeline stages (and a tied table's copies)"},
        {"parallel.cp", p.cp, "context-parallel ranks, whose gradients reduce inside the shard group"},
        {"parallel.ep", p.ep, "expert units, which reduce over groups of their own"}})
    if (degree > 1)
      c.refuse(key, fmt::format("{}: optim.name onebit_adam is defined over the replicas of DDP and HSDP only, not "
                                "over {}; leave it at 1 or use optim.name adamw",
                                degree, why));
}

}  // namespace xtrain::config::rules

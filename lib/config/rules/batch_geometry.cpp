// The global batch is whole micro batches; when the recipe fixes the data-parallel ranks
// (parallel.dp and parallel.fsdp) it splits over them too, known before any rank starts
// (otherwise the trainer checks it).
#include <fmt/format.h>

#include "config/batch_geometry.h"
#include "config/recipe_rule.h"

namespace xtrain::config::rules {

void batch_geometry(const RuleContext& c) {
  const auto& p = c.recipe.parallel;
  const auto& t = c.recipe.train;
  if (t.global_batch_size % t.micro_batch_size != 0) {
    c.refuse("train.global_batch_size",
             fmt::format("{} is not a multiple of train.micro_batch_size {} (global batch = micro batch x "
                         "accumulation steps x data-parallel ranks)",
                         t.global_batch_size, t.micro_batch_size));
    return;
  }
  if (p.dp <= 0 || p.fsdp <= 0) return;
  if (auto problem = batch_geometry_problem(t.global_batch_size, t.micro_batch_size, p.dp * p.fsdp))
    c.refuse("train.global_batch_size", *problem);
}

}  // namespace xtrain::config::rules

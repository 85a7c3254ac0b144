// Offloaded activations are the block inputs that full recompute keeps.
#include <fmt/format.h>

#include "config/recipe_rule.h"

namespace xtrain::config::rules {

void activation_offload(const RuleContext& c) {
  const auto& m = c.recipe.memory;
  if (m.offload_activations && m.recompute != memory::Recompute::full)
    c.refuse("memory.offload_activations",
             fmt::format("needs memory.recompute: full (it offloads the block inputs that recompute keeps), got '{}'",
                         to_string(m.recompute)));
}

}  // namespace xtrain::config::rules

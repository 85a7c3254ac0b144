// A scaled rotary embedding's band edges are in order.
#include <fmt/format.h>

#include "config/recipe_rule.h"

namespace xtrain::config::rules {

void rope_scaling(const RuleContext& c) {
  const auto& rope = c.recipe.model.rope_scaling;
  if (rope.yarn() && rope.beta_fast <= rope.beta_slow)
    c.refuse("model.rope_beta_fast",
             fmt::format("{} must be above model.rope_beta_slow {}", rope.beta_fast, rope.beta_slow));
  if (rope.enabled() && !rope.yarn() && rope.high_freq_factor <= rope.low_freq_factor)
    c.refuse("model.rope_high_freq_factor", fmt::format("{} must be above model.rope_low_freq_factor {}",
                                                        rope.high_freq_factor, rope.low_freq_factor));
}

}  // namespace xtrain::config::rules

// The model's positions cover a training sequence.
#include <fmt/format.h>

#include "config/recipe_rule.h"

namespace xtrain::config::rules {

void sequence_length(const RuleContext& c) {
  const auto& m = c.recipe.model;
  if (m.max_seq_len < c.recipe.data.seq_len)
    c.refuse("model.max_seq_len",
             fmt::format("{} is shorter than data.seq_len {}", m.max_seq_len, c.recipe.data.seq_len));
}

}  // namespace xtrain::config::rules

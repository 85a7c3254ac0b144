// Encoders learn masked tokens, decoders the next one.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/recipe_rule.h"
#include "model/spec/model_spec.h"

namespace xtrain::config::rules {

void objective(const RuleContext& c) {
  const auto& family = c.recipe.model.family;
  const auto* spec = model::find_model_spec(family);
  const bool encoder = spec && !spec->capabilities.causal;
  const auto chosen = c.recipe.data.objective;
  if (chosen == Objective::mlm && !encoder) {
    std::vector<std::string> encoders;
    for (const auto& other : model::model_specs())
      if (!other.capabilities.causal) encoders.push_back(other.family);
    c.refuse("data.objective",
             fmt::format("mlm trains an encoder, and model.family {} is a decoder: set model.family {}, or "
                         "data.objective clm",
                         family, fmt::join(encoders, " or ")));
  }
  if (encoder && chosen != Objective::mlm)
    c.refuse("model.family",
             fmt::format("{} is an encoder trained on masked tokens: set data.objective mlm", family));
}

}  // namespace xtrain::config::rules

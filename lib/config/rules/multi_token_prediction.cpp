// Multi-token prediction: a family that has it. It runs under every layout (under parallel.pp
// its depths run on the last stage, beside the head: parallel/pipeline_stage.h).
#include <fmt/format.h>

#include "config/recipe_rule.h"
#include "model/spec/model_spec.h"

namespace xtrain::config::rules {

void multi_token_prediction(const RuleContext& c) {
  const auto& m = c.recipe.model;
  if (m.mtp_layers == 0) return;
  if (const auto* spec = model::find_model_spec(m.family); spec && !spec->capabilities.multi_token_prediction)
    c.refuse("model.mtp_layers",
             fmt::format("{}: model.family {} has no multi-token prediction (deepseek_v3 has); leave it at 0",
                         m.mtp_layers, m.family));
}

}  // namespace xtrain::config::rules

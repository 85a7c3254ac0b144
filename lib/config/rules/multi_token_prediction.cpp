// Multi-token prediction: a family that has it, on the layouts it runs under.
#include <fmt/format.h>

#include "config/recipe_rule.h"
#include "model/spec/model_spec.h"

namespace xtrain::config::rules {

void multi_token_prediction(const RuleContext& c) {
  const auto& m = c.recipe.model;
  const auto& p = c.recipe.parallel;
  if (m.mtp_layers == 0) return;
  if (const auto* spec = model::find_model_spec(m.family); spec && !spec->capabilities.multi_token_prediction)
    c.refuse("model.mtp_layers",
             fmt::format("{}: model.family {} has no multi-token prediction (deepseek_v3 has); leave it at 0",
                         m.mtp_layers, m.family));
  if (p.pp > 1)
    c.refuse("model.mtp_layers",
             fmt::format("{} with parallel.pp {}: multi-token prediction runs under fsdp, dp, ep, tp and cp only "
                         "for now; leave parallel.pp at 1, or mtp_layers at 0",
                         m.mtp_layers, p.pp));
}

}  // namespace xtrain::config::rules

// A family that reads images needs its vision tower, and only a Hugging Face folder describes
// one (config.json's vision_config): there are no recipe keys for the tower's sizes. The folder's
// own check (model/spec) refuses one without a vision_config; a checkpoint's copy of the recipe
// names the folder it started from but is not resolved again, so the rule asks for the folder.
#include <fmt/format.h>

#include "config/recipe_rule.h"
#include "model/spec/model_spec.h"

namespace xtrain::config::rules {

void vision_tower(const RuleContext& c) {
  const auto& m = c.recipe.model;
  const auto* spec = model::find_model_spec(m.family);
  if (!spec || !spec->capabilities.images || !m.init_from.empty()) return;
  c.refuse("model.family",
           fmt::format("{} reads images through a vision tower, which only a Hugging Face folder describes: set "
                       "model.init_from: hf:DIR to a folder whose config.json has a vision_config",
                       m.family));
}

}  // namespace xtrain::config::rules

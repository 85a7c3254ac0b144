// model.freeze names parts of the family, and leaves one to train.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/recipe_rule.h"
#include "model/spec/model_spec.h"

namespace xtrain::config::rules {

void freeze(const RuleContext& c) {
  const auto& m = c.recipe.model;
  const auto* spec = model::find_model_spec(m.family);
  if (!spec) return;
  std::vector<std::string> parts;
  for (const auto& part : spec->parts) parts.push_back(part.first);
  for (const auto& name : m.freeze) {
    if (std::find(parts.begin(), parts.end(), name) != parts.end()) continue;
    c.refuse("model.freeze",
             parts.empty() ? fmt::format("'{}': model.family {} is one part and cannot freeze any of it", name,
                                         m.family)
                           : fmt::format("'{}' is not a part of model.family {}; its parts are {}", name, m.family,
                                         fmt::join(parts, ", ")));
  }
  if (!parts.empty() && std::all_of(parts.begin(), parts.end(), [&](const std::string& part) {
        return std::find(m.freeze.begin(), m.freeze.end(), part) != m.freeze.end();
      }))
    c.refuse("model.freeze", "every part is frozen, so nothing would train: leave one out");
}

}  // namespace xtrain::config::rules

// Dropout: computed by the families whose layers apply it (capabilities.dropout); any other
// family accepts model.dropout 0 only, rather than training without the dropout asked for.
#include <string>

#include <fmt/format.h>

#include "config/recipe_rule.h"
#include "model/spec/model_spec.h"

namespace xtrain::config::rules {

void dropout(const RuleContext& c) {
  const auto& m = c.recipe.model;
  if (m.dropout == 0) return;
  const auto* spec = model::find_model_spec(m.family);
  if (!spec || spec->capabilities.dropout) return;
  std::string families;
  for (const auto& other : model::model_specs())
    if (other.capabilities.dropout) families += (families.empty() ? "" : ", ") + other.family;
  c.refuse("model.dropout", fmt::format("{}: model.family {} computes no dropout (only {} do); set model.dropout: 0",
                                        m.dropout, m.family, families));
}

}  // namespace xtrain::config::rules

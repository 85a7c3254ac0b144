// The heads split the hidden size, rotary embeddings rotate pairs, and kv heads serve whole
// groups of query heads.
#include <fmt/format.h>

#include "config/recipe_rule.h"

namespace xtrain::config::rules {

void attention_heads(const RuleContext& c) {
  const auto& m = c.recipe.model;
  if (m.latent.enabled())
    ;  // latent attention's heads have sizes of their own (checked by the family's spec)
  else if (m.head_dim_override == 0 && m.hidden_size % m.num_heads != 0)
    c.refuse("model.num_heads",
             fmt::format("{} heads do not divide hidden_size {} (hidden_size must be a multiple of num_heads)",
                         m.num_heads, m.hidden_size));
  else if (m.head_dim() % 2 != 0)
    c.refuse(m.head_dim_override > 0 ? "model.head_dim" : "model.num_heads",
             fmt::format("head size {} = {} must be even for rotary embeddings",
                         m.head_dim_override > 0 ? "head_dim" : "hidden_size/num_heads", m.head_dim()));
  if (m.num_kv_heads > 0 && m.num_heads % m.num_kv_heads != 0)
    c.refuse("model.num_kv_heads",
             fmt::format("{} kv heads do not divide num_heads {} (each kv head serves a whole group of query heads)",
                         m.num_kv_heads, m.num_heads));
}

}  // namespace xtrain::config::rules

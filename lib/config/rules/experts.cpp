// The MoE keys agree with each other, with the family and with parallel.ep.
#include <fmt/format.h>

#include "config/recipe_rule.h"
#include "model/spec/model_spec.h"

namespace xtrain::config::rules {

void experts(const RuleContext& c) {
  const auto& m = c.recipe.model;
  const auto& p = c.recipe.parallel;
  const auto* spec = model::find_model_spec(m.family);
  if (!spec) return;  // reported by the option's check
  const int64_t ep = p.ep;
  if (p.intra_layer_micro_batch > 1 && ep == 1)
    c.refuse("parallel.intra_layer_micro_batch",
             fmt::format("{} overlaps the expert-parallel all-to-all, which needs parallel.ep above 1",
                         p.intra_layer_micro_batch));
  if (ep > 1 && m.num_experts == 0)
    c.refuse("parallel.ep",
             fmt::format("{}, but model.family {} has no experts to split; leave parallel.ep at 1", ep, m.family));
  if (ep > 1 && m.num_experts > 0 && m.num_experts % ep != 0)
    c.refuse("parallel.ep",
             fmt::format("{} does not divide model.num_experts {}: each expert-parallel rank holds the same number "
                         "of experts",
                         ep, m.num_experts));
  if (spec->capabilities.experts && m.num_experts == 0)
    c.refuse("model.family",
             fmt::format("{} is a mixture of experts: set model.num_experts (and num_experts_per_tok, "
                         "moe_intermediate_size)",
                         m.family));
  if (!spec->capabilities.experts && m.num_experts > 0)
    c.refuse("model.num_experts",
             fmt::format("{}, but model.family {} has no experts (a MoE family such as qwen3_moe has)", m.num_experts,
                         m.family));
  if (m.num_experts == 0) return;
  if (spec->check)
    for (const auto& [key, message] : spec->check(m)) c.refuse(key, message);
  if (m.num_experts_per_tok < 1 || m.num_experts_per_tok > m.num_experts)
    c.refuse("model.num_experts_per_tok",
             fmt::format("{} must be between 1 and model.num_experts {}", m.num_experts_per_tok, m.num_experts));
  if (m.moe_intermediate_size < 1)
    c.refuse("model.moe_intermediate_size", "must be set (the width of each expert) when model.num_experts is");
  if (m.n_group > 1 &&
      (m.num_experts % m.n_group != 0 || m.num_experts / m.n_group < 2 || m.router != model::Router::sigmoid_bias))
    c.refuse("model.n_group",
             fmt::format("{} groups need model.router sigmoid_bias and must split model.num_experts {} into groups of "
                         "2 or more",
                         m.n_group, m.num_experts));
  else if (m.n_group > 1 &&
           (m.topk_group > m.n_group || m.num_experts_per_tok > m.topk_group * (m.num_experts / m.n_group)))
    c.refuse("model.topk_group",
             fmt::format("{} of {} groups of {} experts cannot offer num_experts_per_tok {}", m.topk_group, m.n_group,
                         m.num_experts / m.n_group, m.num_experts_per_tok));
}

}  // namespace xtrain::config::rules

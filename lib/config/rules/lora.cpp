// model.lora: adapters on layers the family has, on the layouts and optimizers that train them.
#include <algorithm>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/recipe_rule.h"
#include "model/spec/lora_config.h"
#include "model/spec/model_spec.h"

namespace xtrain::config::rules {

namespace {
std::vector<std::string> lora_families() {
  std::vector<std::string> families;
  for (const auto& spec : model::model_specs())
    if (spec.lora_targets) families.push_back(spec.family);
  return families;
}
}  // namespace

void lora(const RuleContext& c) {
  const auto& lora = c.recipe.model.lora;
  // Without targets the other keys say nothing (a resolved recipe lists them all).
  if (!lora.enabled()) return;
  const auto* spec = model::find_model_spec(c.recipe.model.family);
  if (!spec) return;  // the family's own check names it
  const auto modules = model::lora_target_modules(*spec, c.recipe.model);
  if (modules.empty()) {
    c.refuse("model.lora.targets", fmt::format("model.family {} takes no LoRA adapters yet; the families that do are "
                                               "{}",
                                               spec->family, fmt::join(lora_families(), ", ")));
    return;
  }
  for (const auto& target : lora.targets)
    if (std::find(modules.begin(), modules.end(), target) == modules.end())
      c.refuse("model.lora.targets", fmt::format("'{}' names no module of model.family {}; its modules are {}", target,
                                                 spec->family, fmt::join(modules, ", ")));
  const auto objective = c.recipe.data.objective;
  if (lora.dropout != 0 && (objective == Objective::dpo || objective == Objective::grpo))
    c.refuse("model.lora.dropout", fmt::format("{}: data.objective {} compares the log-probabilities of forwards that "
                                               "dropout would make disagree (TRL's trainers turn it off); set 0",
                                               lora.dropout, to_string(objective)));
  const auto& p = c.recipe.parallel;
  for (const auto& [key, degree] :
       {std::tuple<const char*, int64_t>{"parallel.tp", p.tp}, {"parallel.pp", p.pp}, {"parallel.ep", p.ep}})
    if (degree > 1)
      c.refuse(key, fmt::format("{}: LoRA adapters train under parallel.fsdp, parallel.dp and parallel.cp, not yet "
                                "split over {}; leave it at 1",
                                degree, key));
  if (c.recipe.precision.fp8 != model::Float8Scaling::off)
    c.refuse("precision.fp8", "LoRA trains its adapters in high precision over frozen base weights; FP8 with "
                              "adapters is not supported yet: set precision.fp8 off");
  if (c.recipe.optim.name != Optimizer::adamw)
    c.refuse("optim.name", fmt::format("{}: LoRA adapters train with adamw (their optimizer state is theirs alone); "
                                       "set optim.name adamw",
                                       to_string(c.recipe.optim.name)));
  const auto& m = c.recipe.model;
  if (m.router == model::Router::sigmoid_bias && m.num_experts > 0 && m.router_bias_update_rate > 0)
    c.refuse("model.router_bias_update_rate",
             fmt::format("{}: the expert bias is part of the base, which model.lora freezes, and an adapter file "
                         "does not carry it (PEFT loads the base's); set 0",
                         m.router_bias_update_rate));
  if (m.mtp_layers > 0)
    c.refuse("model.mtp_layers", "LoRA adapts the layers that transformers' model has, and its prediction depths are "
                                 "not among them (PEFT could not load their adapters); set 0");
  if (!c.recipe.model.freeze.empty())
    c.refuse("model.freeze", "with model.lora every base weight is frozen already; leave model.freeze empty");
}

}  // namespace xtrain::config::rules

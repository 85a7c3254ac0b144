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
    if (!model::lora_target_modules(spec).empty()) families.push_back(spec.family);
  return families;
}
}  // namespace

void lora(const RuleContext& c) {
  const auto& lora = c.recipe.model.lora;
  // Without targets the other keys say nothing (a resolved recipe lists them all).
  if (!lora.enabled()) return;
  const auto* spec = model::find_model_spec(c.recipe.model.family);
  if (!spec) return;  // the family's own check names it
  const auto modules = model::lora_target_modules(*spec);
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
  if (!c.recipe.model.freeze.empty())
    c.refuse("model.freeze", "with model.lora every base weight is frozen already; leave model.freeze empty");
}

}  // namespace xtrain::config::rules

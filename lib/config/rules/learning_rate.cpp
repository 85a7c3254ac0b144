// The schedule decays down to optim.min_lr, not up. optim.warmup_steps above train.steps is
// allowed (a smoke run of a real recipe: --set train.steps=6): the schedule is the recipe's, cut
// short, and the trainer warns (optim::LrSchedule::warmup_warning), as Megatron and torchtitan
// let warmup run past the end.
#include <fmt/format.h>

#include "config/recipe_rule.h"

namespace xtrain::config::rules {

void learning_rate(const RuleContext& c) {
  const auto& o = c.recipe.optim;
  if (o.min_lr > o.lr) c.refuse("optim.min_lr", fmt::format("{} is above optim.lr {}", o.min_lr, o.lr));
}

}  // namespace xtrain::config::rules

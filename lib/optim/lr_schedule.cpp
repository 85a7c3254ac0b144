#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace xtrain::optim {

double LrSchedule::at(int64_t step) const {
  if (step <= warmup_steps) return peak_lr * static_cast<double>(step) / std::max<int64_t>(1, warmup_steps);
  const double progress = static_cast<double>(step - warmup_steps) /
                          static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
  const double clamped = std::min(1.0, std::max(0.0, progress));
  switch (decay) {
    case Decay::constant: return peak_lr;
    case Decay::linear: return peak_lr - (peak_lr - min_lr) * clamped;
    case Decay::cosine: return min_lr + (peak_lr - min_lr) * 0.5 * (1.0 + std::cos(M_PI * clamped));
  }
  return peak_lr;  // not reached: the switch covers every decay
}

std::string LrSchedule::warmup_warning() const {
  if (warmup_steps <= total_steps) return "";
  return fmt::format(
      "optim.warmup_steps {} is longer than train.steps {}: the learning rate warms up for the whole run and ends at "
      "{:.3g} (peak {:.3g}), with no decay: the recipe's schedule, cut short",
      warmup_steps, total_steps, at(total_steps), peak_lr);
}

}  // namespace xtrain::optim

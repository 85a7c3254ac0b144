// Learning-rate schedule: linear warmup from 0 to peak, then cosine, linear or constant
// decay to min_lr at the last step. A pure function of the step, so resuming needs no state.
// A warmup longer than the run is the same schedule cut short: the rate climbs towards peak_lr
// until the last step and never decays.
#pragma once
#include <cstdint>
#include <string>

#include "config/lr_schedule_choice.h"

namespace xtrain::optim {

// The decay after warmup; the names are the recipe's optim.schedule.
using Decay = config::LrDecay;

struct LrSchedule {
  double peak_lr = 0;
  double min_lr = 0;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;
  Decay decay = Decay::cosine;

  // Learning rate of optimizer step `step` (1-based: the first update is step 1).
  double at(int64_t step) const;

  // A warning when the warmup outlasts the run (the rate it ends at), or "".
  std::string warmup_warning() const;
};

}  // namespace xtrain::optim

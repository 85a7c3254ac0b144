// Learning-rate schedule: linear warmup from 0 to peak, then cosine, linear or constant
// decay to min_lr at the last step. A pure function of the step, so resuming needs no state.
#pragma once
#include <cstdint>
#include <string>

namespace xtrain::optim {

struct LrSchedule {
  double peak_lr = 0;
  double min_lr = 0;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;
  std::string decay = "cosine";  // cosine | linear | constant

  // Learning rate of optimizer step `step` (1-based: the first update is step 1).
  double at(int64_t step) const;
};

}  // namespace xtrain::optim

// optim.schedule's choices: the decay after warmup, which the recipe holds and
// optim::LrSchedule (optim/lr_schedule.h) follows. Torch-free, so that the recipe names it
// without the optimizers.
#pragma once
#include "util/choice.h"

namespace xtrain::config {

enum class LrDecay { cosine, linear, constant };

XTRAIN_CHOICES_BEGIN
constexpr const char* to_string(LrDecay value) {
  switch (value) {
    case LrDecay::cosine: return "cosine";
    case LrDecay::linear: return "linear";
    case LrDecay::constant: return "constant";
  }
  return nullptr;
}
XTRAIN_CHOICES_END

}  // namespace xtrain::config

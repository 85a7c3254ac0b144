// train.device: where a run trains. The names are the recipe's (util/choice.h).
#pragma once
#include "util/choice.h"

namespace xtrain::util {

enum class DeviceSetting { automatic, cpu, cuda };

XTRAIN_CHOICES_BEGIN
constexpr const char* to_string(DeviceSetting value) {
  switch (value) {
    case DeviceSetting::automatic: return "auto";  // cuda when a device is there and compiled in, else cpu
    case DeviceSetting::cpu: return "cpu";
    case DeviceSetting::cuda: return "cuda";
  }
  return nullptr;
}
XTRAIN_CHOICES_END

}  // namespace xtrain::util

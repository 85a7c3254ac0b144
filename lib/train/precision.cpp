#include "train/precision.h"

#include <ATen/autocast_mode.h>

namespace xtrain::train {

PrecisionScope::PrecisionScope(const std::string& dtype) : autocast_(dtype == "bf16") {
  if (dtype == "fp16") fp16_.emplace();
  if (!autocast_) return;
  at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
  at::autocast::set_cpu_enabled(true);
}

PrecisionScope::~PrecisionScope() {
  if (!autocast_) return;
  at::autocast::set_cpu_enabled(false);
  at::autocast::clear_cache();
}

}  // namespace xtrain::train

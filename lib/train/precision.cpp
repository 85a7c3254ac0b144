#include "train/precision.h"

#include <ATen/autocast_mode.h>

namespace xtrain::train {

AutocastScope::AutocastScope(const std::string& dtype) : enabled_(dtype == "bf16") {
  if (!enabled_) return;
  at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
  at::autocast::set_cpu_enabled(true);
}

AutocastScope::~AutocastScope() {
  if (!enabled_) return;
  at::autocast::set_cpu_enabled(false);
  at::autocast::clear_cache();
}

}  // namespace xtrain::train

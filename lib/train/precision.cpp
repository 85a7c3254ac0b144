#include "train/precision.h"

#include <ATen/autocast_mode.h>

namespace xtrain::train {

PrecisionScope::PrecisionScope(const std::string& dtype, c10::DeviceType device_type) : device_type_(device_type) {
  // CPU fp16 is emulated (no fast fp16 GEMM there); on CUDA fp16 is real autocast.
  const bool cuda = device_type == c10::DeviceType::CUDA;
  if (dtype == "fp16" && !cuda) fp16_.emplace();
  if (dtype == "bf16") autocast_dtype_ = at::kBFloat16;
  if (dtype == "fp16" && cuda) autocast_dtype_ = at::kHalf;
  if (!autocast_dtype_) return;
  at::autocast::set_autocast_dtype(device_type_, *autocast_dtype_);
  at::autocast::set_autocast_enabled(device_type_, true);
}

PrecisionScope::~PrecisionScope() {
  if (!autocast_dtype_) return;
  at::autocast::set_autocast_enabled(device_type_, false);
  at::autocast::clear_cache();
}

}  // namespace xtrain::train

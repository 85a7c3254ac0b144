#include "train/precision.h"

#include <ATen/autocast_mode.h>

namespace xtrain::train {

c10::ScalarType compute_type(config::Dtype dtype) {
  switch (dtype) {
    case config::Dtype::fp32: return at::kFloat;
    case config::Dtype::bf16: return at::kBFloat16;
    case config::Dtype::fp16: return at::kHalf;
  }
  return at::kFloat;  // not reached: the switch covers every dtype
}

PrecisionScope::PrecisionScope(config::Dtype dtype, c10::DeviceType device_type) : device_type_(device_type) {
  // CPU fp16 is emulated (no fast fp16 GEMM there); on CUDA fp16 is real autocast.
  const bool cuda = device_type == c10::DeviceType::CUDA;
  switch (dtype) {
    case config::Dtype::fp32: break;
    case config::Dtype::bf16: autocast_dtype_ = at::kBFloat16; break;
    case config::Dtype::fp16:
      if (cuda)
        autocast_dtype_ = at::kHalf;
      else
        fp16_.emplace();
      break;
  }
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

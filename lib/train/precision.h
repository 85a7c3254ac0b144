// Compute precision of the forward pass, from the recipe's train.dtype, on the parameters'
// device. bf16 runs matmuls in bfloat16 through LibTorch's autocast (CPU or CUDA); fp16 is
// fp16 autocast on CUDA and, on CPU, rounds each projection through fp16 (see
// model/kernels/fp16_emulation.h). Parameters, gradients and optimizer state stay fp32 (master weights)
// in both; fp16 also needs loss scaling (optim/loss_scaler.h), which the trainer applies.
#pragma once
#include <optional>
#include <string>

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include "config/recipe_choices.h"
#include "model/kernels/fp16_emulation.h"

namespace xtrain::train {

// The type matmuls compute in under train.dtype (fp32 for fp32).
c10::ScalarType compute_type(config::Dtype dtype);

class PrecisionScope {
 public:
  explicit PrecisionScope(config::Dtype dtype, c10::DeviceType device_type = c10::DeviceType::CPU);
  ~PrecisionScope();
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  c10::DeviceType device_type_;
  std::optional<c10::ScalarType> autocast_dtype_;
  std::optional<model::Fp16EmulationScope> fp16_;
};

}  // namespace xtrain::train

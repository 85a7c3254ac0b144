// Compute precision of the forward pass, from the recipe's train.dtype. "bf16" runs matmuls in
// bfloat16 through LibTorch's CPU autocast; "fp16" rounds each projection through fp16 (see
// model/fp16_emulation.h). Parameters, gradients and optimizer state stay fp32 (master weights)
// in both; fp16 also needs loss scaling (optim/loss_scaler.h), which the trainer applies.
#pragma once
#include <optional>
#include <string>

#include "model/fp16_emulation.h"

namespace xtrain::train {

class PrecisionScope {
 public:
  explicit PrecisionScope(const std::string& dtype);
  ~PrecisionScope();
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  bool autocast_;
  std::optional<model::Fp16EmulationScope> fp16_;
};

}  // namespace xtrain::train

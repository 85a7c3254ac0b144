// Compute precision for the forward pass. "bf16" runs matmuls in bfloat16 through LibTorch's
// CPU autocast while parameters, gradients and optimizer state stay fp32 (master weights).
#pragma once
#include <string>

namespace xtrain::train {

class AutocastScope {
 public:
  explicit AutocastScope(const std::string& dtype);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool enabled_;
};

}  // namespace xtrain::train

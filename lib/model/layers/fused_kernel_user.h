// A module with a fused path (model/kernels/fused_*.h), or with parts that have one. The memory
// policy turns the fused kernels on or off through this interface (model/kernel_choice.h): a
// leaf sets its own choice, a composite passes it to the parts it knows by type, so that nothing
// walks the module tree and casts.
#pragma once

namespace xtrain::model {

class FusedKernelUser {
 public:
  virtual ~FusedKernelUser() = default;
  // true: the fused kernel where it applies; false: the unfused LibTorch ops.
  virtual void set_fused_kernels(bool fused) = 0;
};

}  // namespace xtrain::model

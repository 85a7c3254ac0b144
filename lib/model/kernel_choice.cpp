#include "model/kernel_choice.h"

namespace xtrain::model {

void use_fused_kernels(FusedKernelUser& root, bool fused) { root.set_fused_kernels(fused); }

}  // namespace xtrain::model

#include "model/fused_kernels.h"

#include "model/rms_norm.h"

namespace xtrain::model {

void use_fused_kernels(torch::nn::Module& root, bool fused) {
  for (const auto& module : root.modules()) {
    if (auto* norm = module->as<RMSNormImpl>()) norm->fused = fused;
  }
}

}  // namespace xtrain::model

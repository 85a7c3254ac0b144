#include "model/fused_kernels.h"

#include "model/attention.h"
#include "model/moe.h"
#include "model/rms_norm.h"
#include "model/swiglu.h"

namespace xtrain::model {

void use_fused_kernels(torch::nn::Module& root, bool fused) {
  for (const auto& module : root.modules()) {
    if (auto* norm = module->as<RMSNormImpl>()) norm->fused = fused;
    if (auto* mlp = module->as<SwiGLUImpl>()) mlp->fused = fused;
    if (auto* attention = module->as<AttentionImpl>()) attention->fused_rotary = fused;
    if (auto* moe = module->as<MoeBlockImpl>()) moe->fused = fused;
  }
}

}  // namespace xtrain::model

#include "model/kernel_choice.h"

#include "model/attention/attention.h"
#include "model/layers/moe.h"
#include "model/layers/rms_norm.h"
#include "model/layers/swiglu.h"

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

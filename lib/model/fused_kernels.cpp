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

bool cuda_fused_kernel_takes(const torch::Tensor& t) {
#ifdef XTRAIN_CUDA
  const auto dtype = t.scalar_type();
  return t.is_cuda() && (dtype == torch::kFloat32 || dtype == torch::kBFloat16 || dtype == torch::kFloat16);
#else
  (void)t;
  return false;
#endif
}

}  // namespace xtrain::model

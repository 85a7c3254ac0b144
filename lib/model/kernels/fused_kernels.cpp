#include "model/kernels/fused_kernels.h"

namespace xtrain::model {

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

#include "optim/fused_adamw.h"

#include <cmath>

#include <torch/torch.h>

#include "optim/adamw_parallel.h"
#include "model/kernels/fused_kernels.h"
#include "model/kernels/cuda/fused_kernels_cuda.h"

namespace xtrain::optim {

bool fused_adamw_applies(const torch::Tensor& param, const torch::Tensor& grad, const torch::Tensor& exp_avg,
                         const torch::Tensor& exp_avg_sq) {
  if (!param.device().is_cpu() && !model::cuda_fused_kernel_takes(param)) return false;
  for (const auto* t : {&param, &grad, &exp_avg, &exp_avg_sq})
    if (t->scalar_type() != torch::kFloat32 || t->device() != param.device() || !t->is_contiguous() ||
        t->numel() != param.numel())
      return false;
  return true;
}

void fused_adamw_step(const torch::Tensor& param, const torch::Tensor& grad, const torch::Tensor& exp_avg,
                      const torch::Tensor& exp_avg_sq, const AdamWStep& step) {
  TORCH_CHECK(fused_adamw_applies(param, grad, exp_avg, exp_avg_sq),
              "fused_adamw_step: contiguous fp32 tensors of one size on one device expected");
  if (param.is_cuda()) {
    model::cuda::adamw_step(param, grad, exp_avg, exp_avg_sq, step.lr, step.beta1, step.beta2, step.eps,
                            step.weight_decay, step.step);
    return;
  }
  const double t = static_cast<double>(step.step);
  const AdamWScalars s{static_cast<float>(1.0 - step.lr * step.weight_decay),
                      static_cast<float>(step.beta1),
                      static_cast<float>(1.0 - step.beta1),
                      static_cast<float>(step.beta2),
                      static_cast<float>(1.0 - step.beta2),
                      static_cast<float>(step.lr / (1.0 - std::pow(step.beta1, t))),
                      static_cast<float>(std::sqrt(1.0 - std::pow(step.beta2, t))),
                      static_cast<float>(step.eps)};
  float *p = param.data_ptr<float>(), *m = exp_avg.data_ptr<float>(), *v = exp_avg_sq.data_ptr<float>();
  const float* g = grad.data_ptr<float>();
  adamw_elements_in_parallel(p, g, m, v, param.numel(), s);
}

}  // namespace xtrain::optim

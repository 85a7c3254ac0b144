#include "model/kernels/fused_swiglu.h"

#include <torch/torch.h>

#include "model/kernels/fused_kernels.h"
#include "model/kernels/swiglu_rows.h"
#include "model/kernels/cuda/fused_kernels_cuda.h"

namespace xtrain::model {
namespace {

// Whether the kernel can read t where it lies, as rows of its last dimension a fixed stride apart
// (a contiguous tensor, or a slice of the last dimension of one), instead of a copy.
bool has_uniform_rows(const torch::Tensor& t) {
  if (t.dim() == 0 || t.stride(-1) != 1) return false;
  for (int64_t i = 0; i + 2 < t.dim(); ++i)
    if (t.size(i) > 1 && t.stride(i) != t.stride(i + 1) * t.size(i + 1)) return false;
  return true;
}

SwigluRows swiglu_rows_of(const torch::Tensor& t) {
  const int64_t width = t.dim() == 0 ? 1 : t.size(-1);
  const int64_t stride = t.dim() >= 2 ? t.stride(-2) : width;
  return {t.data_ptr<float>(), width == 0 ? 0 : t.numel() / width, width, stride};
}

class FusedSwiGLU : public torch::autograd::Function<FusedSwiGLU> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& gate_in,
                               const torch::Tensor& up_in) {
    if (gate_in.is_cuda()) {
      const auto gate = gate_in.contiguous(), up = up_in.contiguous();
      auto out = torch::empty_like(gate);
      cuda::swiglu_forward(gate, up, out);
      ctx->save_for_backward({gate, up});
      return out;
    }
    const auto gate = has_uniform_rows(gate_in) ? gate_in : gate_in.contiguous();
    const auto up = has_uniform_rows(up_in) ? up_in : up_in.contiguous();
    auto out = torch::empty(gate.sizes(), gate.options());
    swiglu_rows(swiglu_rows_of(gate), swiglu_rows_of(up), out.data_ptr<float>());
    ctx->save_for_backward({gate, up});
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& gate = saved[0];
    const auto& up = saved[1];
    const auto grad = grads[0].contiguous();
    auto dgate = torch::empty(gate.sizes(), gate.options()), dup = torch::empty(up.sizes(), up.options());
    if (gate.is_cuda()) {
      cuda::swiglu_backward(grad, gate, up, dgate, dup);
      return {dgate, dup};
    }
    swiglu_rows_backward(grad.data_ptr<float>(), swiglu_rows_of(gate), swiglu_rows_of(up), dgate.data_ptr<float>(),
                         dup.data_ptr<float>());
    return {dgate, dup};
  }
};

}  // namespace

bool fused_swiglu_applies(const torch::Tensor& gate, const torch::Tensor& up) {
  if (cuda_fused_kernel_takes(gate))
    return up.device() == gate.device() && up.scalar_type() == gate.scalar_type() && gate.sizes() == up.sizes();
  return gate.device().is_cpu() && up.device().is_cpu() && gate.scalar_type() == torch::kFloat32 &&
         up.scalar_type() == torch::kFloat32 && gate.sizes() == up.sizes();
}

torch::Tensor fused_swiglu(const torch::Tensor& gate, const torch::Tensor& up) {
  TORCH_CHECK(fused_swiglu_applies(gate, up), "fused_swiglu: fp32 CPU tensors (or CUDA ones of one float dtype) of one shape expected");
  return FusedSwiGLU::apply(gate, up);
}

}  // namespace xtrain::model

#include "model/kernels/fused_swiglu.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "util/cpu_kernel_support.h"
#include "model/kernels/fused_kernels.h"
#include "model/kernels/cuda/fused_kernels_cuda.h"

namespace xtrain::model {
namespace {

XTRAIN_CPU_CLONES void swiglu_elements(const float* gate, const float* up, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + cpu::vector_exp(-gate[i])) * up[i];
}

// With s = sigmoid(gate): d up = g * gate * s, d gate = g * up * s * (1 + gate * (1 - s)).
XTRAIN_CPU_CLONES void swiglu_elements_backward(const float* g, const float* gate, const float* up, float* dgate,
                                                float* dup, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float s = 1.0f / (1.0f + cpu::vector_exp(-gate[i]));
    dup[i] = g[i] * (gate[i] * s);
    dgate[i] = g[i] * up[i] * (s * (1.0f + gate[i] * (1.0f - s)));
  }
}

// A tensor as rows of its last dimension, `stride` floats apart: a contiguous tensor, or a slice
// of the last dimension of one (a mixture of experts' gate and up halves of one matmul's output),
// which the kernel reads where it lies instead of copying.
struct Rows {
  const float* data;
  int64_t count, width, stride;
};

bool has_uniform_rows(const torch::Tensor& t) {
  if (t.dim() == 0 || t.stride(-1) != 1) return false;
  for (int64_t i = 0; i + 2 < t.dim(); ++i)
    if (t.size(i) > 1 && t.stride(i) != t.stride(i + 1) * t.size(i + 1)) return false;
  return true;
}

Rows rows_of(const torch::Tensor& t) {
  const int64_t width = t.dim() == 0 ? 1 : t.size(-1);
  const int64_t stride = t.dim() >= 2 ? t.stride(-2) : width;
  return {t.data_ptr<float>(), width == 0 ? 0 : t.numel() / width, width, stride};
}

// Runs `rows_kernel(first_row, row_count)` over the rows in parallel, whole rows to a task.
template <class RowsKernel>
void for_rows(const Rows& rows, const RowsKernel& rows_kernel) {
  at::parallel_for(0, rows.count, cpu::grain_in_rows(rows.width), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) rows_kernel(r);
  });
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
    const Rows g = rows_of(gate), u = rows_of(up);
    float* o = out.data_ptr<float>();
    for_rows(g, [&](int64_t r) {
      swiglu_elements(g.data + r * g.stride, u.data + r * u.stride, o + r * g.width, g.width);
    });
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
    const Rows g = rows_of(gate), u = rows_of(up);
    const float* dy = grad.data_ptr<float>();
    float *dg = dgate.data_ptr<float>(), *du = dup.data_ptr<float>();
    for_rows(g, [&](int64_t r) {
      const int64_t at = r * g.width;
      swiglu_elements_backward(dy + at, g.data + r * g.stride, u.data + r * u.stride, dg + at, du + at, g.width);
    });
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

#include "model/kernels/cuda/fused_kernels_cuda.h"

#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "model/kernels/cuda/fused_kernels_launch.h"

namespace xtrain::model::cuda {
namespace {

KernelDtype kernel_dtype(const Tensor& t, const char* op) {
  switch (t.scalar_type()) {
    case at::kFloat:
      return KernelDtype::f32;
    case at::kBFloat16:
      return KernelDtype::bf16;
    case at::kHalf:
      return KernelDtype::f16;
    default:
      TORCH_CHECK(false, op, ": fp32, bf16 or fp16 tensors expected, got ", t.scalar_type());
  }
}

// t is a contiguous CUDA tensor on like's device, of like's dtype unless dtype is given.
void check_tensor(const Tensor& t, const Tensor& like, const char* op, const char* name,
                  std::optional<at::ScalarType> dtype = std::nullopt) {
  TORCH_CHECK(t.defined() && t.is_cuda(), op, ": ", name, " must be a CUDA tensor");
  TORCH_CHECK(t.device() == like.device(), op, ": ", name, " is on ", t.device(), ", expected ", like.device());
  TORCH_CHECK(t.is_contiguous(), op, ": ", name, " must be contiguous");
  const auto expected = dtype.value_or(like.scalar_type());
  TORCH_CHECK(t.scalar_type() == expected, op, ": ", name, " is ", t.scalar_type(), ", expected ", expected);
}

void check_same_shape(const Tensor& t, const Tensor& like, const char* op, const char* name) {
  TORCH_CHECK(t.sizes() == like.sizes(), op, ": ", name, " has shape ", t.sizes(), ", expected ", like.sizes());
}

cudaStream_t current_stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

// Rows and row length of an RMSNorm input; the kernels give each row a block (grid limit 2^31-1).
std::pair<int64_t, int64_t> rows_and_length(const Tensor& x, const char* op) {
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) > 0, op, ": x must have a non-empty last dimension");
  const int64_t d = x.size(-1), rows = x.numel() / d;
  TORCH_CHECK(rows <= std::numeric_limits<int32_t>::max(), op, ": ", rows, " rows exceed the grid");
  return {rows, d};
}

}  // namespace

void rms_norm_forward(const Tensor& x, const Tensor& w, double eps, const Tensor& y, const Tensor& rstd) {
  constexpr const char* op = "rms_norm_forward";
  check_tensor(x, x, op, "x");
  const auto dtype = kernel_dtype(x, op);
  const auto [rows, d] = rows_and_length(x, op);
  check_tensor(w, x, op, "w");
  TORCH_CHECK(w.dim() == 1 && w.size(0) == d, op, ": w must be [", d, "], got ", w.sizes());
  check_tensor(y, x, op, "y");
  check_same_shape(y, x, op, "y");
  check_tensor(rstd, x, op, "rstd", at::kFloat);
  TORCH_CHECK(rstd.numel() == rows, op, ": rstd must hold ", rows, " values, got ", rstd.numel());
  const c10::cuda::CUDAGuard guard(x.device());
  launch_rms_norm_forward(dtype, x.const_data_ptr(), w.const_data_ptr(), y.mutable_data_ptr(),
                          rstd.mutable_data_ptr<float>(), rows, d, static_cast<float>(eps), current_stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void rms_norm_backward(const Tensor& g, const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& dx,
                       const Tensor& dw) {
  constexpr const char* op = "rms_norm_backward";
  check_tensor(x, x, op, "x");
  const auto dtype = kernel_dtype(x, op);
  const auto [rows, d] = rows_and_length(x, op);
  check_tensor(g, x, op, "g");
  check_same_shape(g, x, op, "g");
  check_tensor(w, x, op, "w");
  TORCH_CHECK(w.dim() == 1 && w.size(0) == d, op, ": w must be [", d, "], got ", w.sizes());
  check_tensor(rstd, x, op, "rstd", at::kFloat);
  TORCH_CHECK(rstd.numel() == rows, op, ": rstd must hold ", rows, " values, got ", rstd.numel());
  check_tensor(dx, x, op, "dx");
  check_same_shape(dx, x, op, "dx");
  check_tensor(dw, x, op, "dw", at::kFloat);
  TORCH_CHECK(dw.numel() == d, op, ": dw must hold ", d, " values, got ", dw.numel());
  const c10::cuda::CUDAGuard guard(x.device());
  // Scratch from the caching allocator, ordered on the current stream like the kernels.
  auto row_scale = at::empty({rows}, x.options().dtype(at::kFloat));
  auto dw_partial = at::empty({rms_norm_backward_chunks(rows, d), d}, x.options().dtype(at::kDouble));
  launch_rms_norm_backward(dtype, g.const_data_ptr(), x.const_data_ptr(), w.const_data_ptr(),
                           rstd.const_data_ptr<float>(), dx.mutable_data_ptr(), dw.mutable_data_ptr<float>(),
                           row_scale.mutable_data_ptr<float>(), dw_partial.mutable_data_ptr<double>(), rows, d,
                           current_stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void swiglu_forward(const Tensor& gate, const Tensor& up, const Tensor& out) {
  constexpr const char* op = "swiglu_forward";
  check_tensor(gate, gate, op, "gate");
  const auto dtype = kernel_dtype(gate, op);
  for (const auto& [t, name] : {std::pair{&up, "up"}, std::pair{&out, "out"}}) {
    check_tensor(*t, gate, op, name);
    check_same_shape(*t, gate, op, name);
  }
  const c10::cuda::CUDAGuard guard(gate.device());
  launch_swiglu_forward(dtype, gate.const_data_ptr(), up.const_data_ptr(), out.mutable_data_ptr(), gate.numel(),
                        current_stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void swiglu_backward(const Tensor& g, const Tensor& gate, const Tensor& up, const Tensor& dgate, const Tensor& dup) {
  constexpr const char* op = "swiglu_backward";
  check_tensor(gate, gate, op, "gate");
  const auto dtype = kernel_dtype(gate, op);
  for (const auto& [t, name] :
       {std::pair{&g, "g"}, std::pair{&up, "up"}, std::pair{&dgate, "dgate"}, std::pair{&dup, "dup"}}) {
    check_tensor(*t, gate, op, name);
    check_same_shape(*t, gate, op, name);
  }
  const c10::cuda::CUDAGuard guard(gate.device());
  launch_swiglu_backward(dtype, g.const_data_ptr(), gate.const_data_ptr(), up.const_data_ptr(),
                         dgate.mutable_data_ptr(), dup.mutable_data_ptr(), gate.numel(), current_stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void rotary_qk(const Tensor& q, const Tensor& k, const Tensor& cos, const Tensor& sin, bool inverse,
               const Tensor& q_out, const Tensor& k_out) {
  constexpr const char* op = "rotary_qk";
  check_tensor(q, q, op, "q");
  const auto dtype = kernel_dtype(q, op);
  check_tensor(k, q, op, "k");
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4, op, ": q and k must be [B, T, heads, D], got ", q.sizes(), " and ",
              k.sizes());
  const int64_t batch = q.size(0), tokens = q.size(1), head_dim = q.size(3);
  TORCH_CHECK(k.size(0) == batch && k.size(1) == tokens && k.size(3) == head_dim, op,
              ": k must match q's batch, tokens and head size, got ", k.sizes(), " against ", q.sizes());
  TORCH_CHECK(head_dim % 2 == 0, op, ": the head size must be even, got ", head_dim);
  for (const auto& [t, name] : {std::pair{&cos, "cos"}, std::pair{&sin, "sin"}}) {
    check_tensor(*t, q, op, name, at::kFloat);
    TORCH_CHECK(t->dim() == 2 && t->size(0) == tokens && t->size(1) == head_dim, op, ": ", name, " must be [",
                tokens, ", ", head_dim, "], got ", t->sizes());
  }
  check_tensor(q_out, q, op, "q_out");
  check_same_shape(q_out, q, op, "q_out");
  check_tensor(k_out, q, op, "k_out");
  check_same_shape(k_out, k, op, "k_out");
  TORCH_CHECK(batch * tokens <= std::numeric_limits<int32_t>::max() &&
                  (q.size(2) + k.size(2)) * head_dim <= std::numeric_limits<int32_t>::max(),
              op, ": q and k exceed the kernel's grid");
  const c10::cuda::CUDAGuard guard(q.device());
  launch_rotary_qk(dtype, q.const_data_ptr(), k.const_data_ptr(), cos.const_data_ptr<float>(),
                   sin.const_data_ptr<float>(), q_out.mutable_data_ptr(), k_out.mutable_data_ptr(), batch, tokens,
                   q.size(2), k.size(2), head_dim, inverse, current_stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq, double lr,
                double beta1, double beta2, double eps, double weight_decay, int64_t step) {
  constexpr const char* op = "adamw_step";
  check_tensor(param, param, op, "param", at::kFloat);
  for (const auto& [t, name] :
       {std::pair{&grad, "grad"}, std::pair{&exp_avg, "exp_avg"}, std::pair{&exp_avg_sq, "exp_avg_sq"}}) {
    check_tensor(*t, param, op, name, at::kFloat);
    check_same_shape(*t, param, op, name);
  }
  TORCH_CHECK(step >= 1, op, ": steps count from 1, got ", step);
  const auto steps = static_cast<double>(step);
  AdamWScalars scalars{};
  scalars.decay = static_cast<float>(1.0 - lr * weight_decay);
  scalars.beta1 = static_cast<float>(beta1);
  scalars.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  scalars.beta2 = static_cast<float>(beta2);
  scalars.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  scalars.neg_step_size = static_cast<float>(-(lr / (1.0 - std::pow(beta1, steps))));
  scalars.bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, steps)));
  scalars.eps = static_cast<float>(eps);
  const c10::cuda::CUDAGuard guard(param.device());
  launch_adamw_step(param.mutable_data_ptr<float>(), grad.const_data_ptr<float>(), exp_avg.mutable_data_ptr<float>(),
                    exp_avg_sq.mutable_data_ptr<float>(), param.numel(), scalars, current_stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace xtrain::model::cuda

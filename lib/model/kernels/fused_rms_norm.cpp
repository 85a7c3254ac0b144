#include "model/kernels/fused_rms_norm.h"

#include <algorithm>
#include <cmath>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "util/cpu_kernel_support.h"
#include "model/kernels/fused_kernels.h"
#include "model/kernels/cuda/fused_kernels_cuda.h"

namespace xtrain::model {
namespace {

// Rows per block of the weight's gradient: each block sums its rows into a row of its own.
constexpr int64_t kRowsPerBlock = 64;

// y = w * x * r; with an addend a, the row normalised is h = x + a, written to h.
XTRAIN_CPU_CLONES void normalize_rows(const float* x, const float* a, float* h, const float* w, float* y, float* rstd,
                                      int64_t rows, int64_t d, double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    float* yr = y + r * d;
    if (a) {
      const float* ar = a + r * d;
      float* hr = h + r * d;
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) hr[i] = xr[i] + ar[i];
      xr = hr;
    }
    double squares = 0;
#pragma omp simd reduction(+ : squares)
    for (int64_t i = 0; i < d; ++i) squares += static_cast<double>(xr[i]) * xr[i];
    const auto inv = static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(d) + eps));
    rstd[r] = inv;
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) yr[i] = w[i] * (xr[i] * inv);
  }
}

// dx = r * (g*w - n * mean(g*w*n)) with n = x*r recomputed, plus dx_more (the gradient x takes
// by its other use, as the residual) when given; dw_block += g * n.
XTRAIN_CPU_CLONES void normalize_rows_backward(const float* g, const float* x, const float* w, const float* rstd,
                                               const float* dx_more, float* dx, double* dw_block, int64_t rows,
                                               int64_t d) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* gr = g + r * d;
    const float* xr = x + r * d;
    float* dxr = dx + r * d;
    const float inv = rstd[r];
    double projection = 0;
#pragma omp simd reduction(+ : projection)
    for (int64_t i = 0; i < d; ++i) projection += static_cast<double>(gr[i] * w[i]) * xr[i];
    const auto mean_gwn = static_cast<float>(projection * inv / static_cast<double>(d));
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) {
      const float n = xr[i] * inv;
      dxr[i] = inv * (gr[i] * w[i] - n * mean_gwn);
      dw_block[i] += static_cast<double>(gr[i]) * n;
    }
    if (dx_more) {
      const float* mr = dx_more + r * d;
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) dxr[i] += mr[i];
    }
  }
}

int64_t rows_of(const torch::Tensor& x) { return x.numel() / x.size(-1); }

// Into y and rstd: w * x * r, or with an addend a defined, h = x + a into h and w * h * r.
void normalize_on_cpu(const torch::Tensor& x, const torch::Tensor& a, const torch::Tensor& h, const torch::Tensor& w,
                      double eps, const torch::Tensor& y, const torch::Tensor& rstd) {
  const int64_t d = x.size(-1), rows = rows_of(x);
  const float *xp = x.data_ptr<float>(), *wp = w.data_ptr<float>();
  const float* ap = a.defined() ? a.data_ptr<float>() : nullptr;
  float* hp = a.defined() ? h.data_ptr<float>() : nullptr;
  float *yp = y.data_ptr<float>(), *rp = rstd.data_ptr<float>();
  at::parallel_for(0, rows, cpu::grain_in_rows(d), [&](int64_t begin, int64_t end) {
    normalize_rows(xp + begin * d, ap ? ap + begin * d : nullptr, hp ? hp + begin * d : nullptr, wp, yp + begin * d,
                   rp + begin, end - begin, d, eps);
  });
}

// dx (plus dx_more when defined) into dx; returns dw in fp32, summed over fixed blocks of rows.
torch::Tensor normalize_backward_on_cpu(const torch::Tensor& g, const torch::Tensor& x, const torch::Tensor& w,
                                        const torch::Tensor& rstd, const torch::Tensor& dx_more,
                                        const torch::Tensor& dx) {
  const int64_t d = x.size(-1), rows = rows_of(x);
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  auto dw_blocks = torch::zeros({std::max<int64_t>(blocks, 1), d}, x.options().dtype(torch::kFloat64));
  const float *gp = g.data_ptr<float>(), *xp = x.data_ptr<float>(), *wp = w.data_ptr<float>();
  const float* rp = rstd.data_ptr<float>();
  const float* mp = dx_more.defined() ? dx_more.data_ptr<float>() : nullptr;
  float* dxp = dx.data_ptr<float>();
  double* dwp = dw_blocks.data_ptr<double>();
  at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const int64_t first = b * kRowsPerBlock, count = std::min(kRowsPerBlock, rows - first);
      normalize_rows_backward(gp + first * d, xp + first * d, wp, rp + first, mp ? mp + first * d : nullptr,
                              dxp + first * d, dwp + b * d, count, d);
    }
  });
  return dw_blocks.sum(0).to(torch::kFloat32);
}

class FusedRmsNorm : public torch::autograd::Function<FusedRmsNorm> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& w_in, double eps) {
    const auto x = x_in.contiguous();
    const auto w = w_in.contiguous();
    auto y = torch::empty_like(x);
    auto rstd = torch::empty({rows_of(x)}, x.options().dtype(torch::kFloat32));
    if (x.is_cuda())
      cuda::rms_norm_forward(x, w, eps, y, rstd);
    else
      normalize_on_cpu(x, {}, {}, w, eps, y, rstd);
    ctx->save_for_backward({x, w, rstd});
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& w = saved[1];
    const auto& rstd = saved[2];
    const auto g = grads[0].contiguous();
    auto dx = torch::empty_like(x);
    if (x.is_cuda()) {
      auto dw = torch::empty({x.size(-1)}, x.options().dtype(torch::kFloat32));
      cuda::rms_norm_backward(g, x, w, rstd, dx, dw);
      return {dx, dw.to(w.scalar_type()), torch::Tensor()};
    }
    return {dx, normalize_backward_on_cpu(g, x, w, rstd, {}, dx), torch::Tensor()};
  }
};

// (h, y) = (x + a, rms_norm(x + a)): the residual stream's add and the norm after it in one pass.
// h is both an output and what backward reads; its gradient is the norm's plus h's own.
class FusedAddRmsNorm : public torch::autograd::Function<FusedAddRmsNorm> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x_in,
                                                const torch::Tensor& a_in, const torch::Tensor& w_in, double eps) {
    const auto x = x_in.contiguous(), a = a_in.contiguous(), w = w_in.contiguous();
    auto h = torch::empty_like(x), y = torch::empty_like(x);
    auto rstd = torch::empty({rows_of(x)}, x.options());
    normalize_on_cpu(x, a, h, w, eps, y, rstd);
    ctx->save_for_backward({h, w, rstd});
    return {h, y};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& h = saved[0];
    const auto dh_own = grads[0].defined() ? grads[0].contiguous() : torch::Tensor();
    const auto dy = grads[1].defined() ? grads[1].contiguous() : torch::zeros_like(h);
    auto dh = torch::empty_like(h);
    auto dw = normalize_backward_on_cpu(dy, h, saved[1], saved[2], dh_own, dh);
    return {dh, dh, dw, torch::Tensor()};
  }
};

}  // namespace

bool fused_rms_norm_applies(const torch::Tensor& x, const torch::Tensor& w) {
  const bool shapes = x.dim() >= 1 && w.dim() == 1 && w.size(0) == x.size(-1);
  if (cuda_fused_kernel_takes(x))
    return shapes && w.device() == x.device() && w.scalar_type() == x.scalar_type();
  return x.device().is_cpu() && w.device().is_cpu() && x.scalar_type() == torch::kFloat32 &&
         w.scalar_type() == torch::kFloat32 && shapes;
}

torch::Tensor fused_rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  TORCH_CHECK(fused_rms_norm_applies(x, w),
              "fused_rms_norm: fp32 CPU tensors (or CUDA ones of one float dtype) with w of x's last size expected");
  return FusedRmsNorm::apply(x, w, eps);
}

bool fused_add_rms_norm_applies(const torch::Tensor& x, const torch::Tensor& a, const torch::Tensor& w) {
  return x.device().is_cpu() && fused_rms_norm_applies(x, w) && a.device().is_cpu() &&
         a.scalar_type() == torch::kFloat32 && a.sizes() == x.sizes();
}

std::pair<torch::Tensor, torch::Tensor> fused_add_rms_norm(const torch::Tensor& x, const torch::Tensor& a,
                                                           const torch::Tensor& w, double eps) {
  TORCH_CHECK(fused_add_rms_norm_applies(x, a, w),
              "fused_add_rms_norm: fp32 CPU x and a of one shape, w of their last size expected");
  auto outputs = FusedAddRmsNorm::apply(x, a, w, eps);
  return {outputs[0], outputs[1]};
}

}  // namespace xtrain::model

#include "model/fused_rms_norm.h"

#include <algorithm>
#include <cmath>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "util/cpu_kernel_support.h"
#include "model/fused_kernels.h"
#ifdef XTRAIN_CUDA
#include "model/cuda/fused_kernels_cuda.h"
#endif

namespace xtrain::model {
namespace {

// Rows per block of the weight's gradient: each block sums its rows into a row of its own.
constexpr int64_t kRowsPerBlock = 64;

XTRAIN_CPU_CLONES void normalize_rows(const float* x, const float* w, float* y, float* rstd, int64_t rows,
                                      int64_t d, double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    float* yr = y + r * d;
    double squares = 0;
#pragma omp simd reduction(+ : squares)
    for (int64_t i = 0; i < d; ++i) squares += static_cast<double>(xr[i]) * xr[i];
    const auto inv = static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(d) + eps));
    rstd[r] = inv;
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) yr[i] = w[i] * (xr[i] * inv);
  }
}

// dx = r * (g*w - n * mean(g*w*n)) with n = x*r recomputed; dw_block += g * n.
XTRAIN_CPU_CLONES void normalize_rows_backward(const float* g, const float* x, const float* w, const float* rstd,
                                               float* dx, double* dw_block, int64_t rows, int64_t d) {
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
  }
}

int64_t rows_of(const torch::Tensor& x) { return x.numel() / x.size(-1); }

class FusedRmsNorm : public torch::autograd::Function<FusedRmsNorm> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& w_in, double eps) {
    const auto x = x_in.contiguous();
    const auto w = w_in.contiguous();
    const int64_t d = x.size(-1), rows = rows_of(x);
    auto y = torch::empty_like(x);
    auto rstd = torch::empty({rows}, x.options().dtype(torch::kFloat32));
#ifdef XTRAIN_CUDA
    if (x.is_cuda()) {
      cuda::rms_norm_forward(x, w, eps, y, rstd);
      ctx->save_for_backward({x, w, rstd});
      return y;
    }
#endif
    const float* xp = x.data_ptr<float>();
    const float* wp = w.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    float* rp = rstd.data_ptr<float>();
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(d, 1));
    at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
      normalize_rows(xp + begin * d, wp, yp + begin * d, rp + begin, end - begin, d, eps);
    });
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
    const int64_t d = x.size(-1), rows = rows_of(x);
    auto dx = torch::empty_like(x);
#ifdef XTRAIN_CUDA
    if (x.is_cuda()) {
      auto dw = torch::empty({d}, x.options().dtype(torch::kFloat32));
      cuda::rms_norm_backward(g, x, w, rstd, dx, dw);
      return {dx, dw.to(w.scalar_type()), torch::Tensor()};
    }
#endif
    const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    auto dw_blocks = torch::zeros({std::max<int64_t>(blocks, 1), d}, x.options().dtype(torch::kFloat64));
    const float *gp = g.data_ptr<float>(), *xp = x.data_ptr<float>(), *wp = w.data_ptr<float>();
    const float* rp = rstd.data_ptr<float>();
    float* dxp = dx.data_ptr<float>();
    double* dwp = dw_blocks.data_ptr<double>();
    at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const int64_t first = b * kRowsPerBlock, count = std::min(kRowsPerBlock, rows - first);
        normalize_rows_backward(gp + first * d, xp + first * d, wp, rp + first, dxp + first * d, dwp + b * d, count,
                                d);
      }
    });
    return {dx, dw_blocks.sum(0).to(torch::kFloat32), torch::Tensor()};
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

}  // namespace xtrain::model

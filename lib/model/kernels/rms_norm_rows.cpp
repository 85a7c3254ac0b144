#include "model/kernels/rms_norm_rows.h"

#include <algorithm>
#include <cmath>

#include <ATen/Parallel.h>

#include "util/cpu_kernel_support.h"

namespace xtrain::model {
namespace {

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

}  // namespace

void rms_norm_rows(const float* x, const float* a, float* h, const float* w, float* y, float* rstd, int64_t rows,
                   int64_t d, double eps) {
  at::parallel_for(0, rows, cpu::grain_in_rows(d), [&](int64_t begin, int64_t end) {
    normalize_rows(x + begin * d, a ? a + begin * d : nullptr, h ? h + begin * d : nullptr, w, y + begin * d,
                   rstd + begin, end - begin, d, eps);
  });
}

void rms_norm_rows_backward(const float* g, const float* x, const float* w, const float* rstd, const float* dx_more,
                            float* dx, double* dw_blocks, int64_t rows, int64_t d) {
  const int64_t blocks = (rows + kRmsNormRowsPerBlock - 1) / kRmsNormRowsPerBlock;
  at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const int64_t first = b * kRmsNormRowsPerBlock, count = std::min(kRmsNormRowsPerBlock, rows - first);
      normalize_rows_backward(g + first * d, x + first * d, w, rstd + first, dx_more ? dx_more + first * d : nullptr,
                              dx + first * d, dw_blocks + b * d, count, d);
    }
  });
}

}  // namespace xtrain::model

#include "model/kernels/rotary_rows.h"

#include <ATen/Parallel.h>

#include "util/cpu_kernel_support.h"

namespace xtrain::model {
namespace {

// out = x * c + rotate_half(x) * s, where rotate_half(x) = [-x2, x1] for the halves x1, x2.
XTRAIN_CPU_CLONES void rotate_row(const float* x, const float* c, const float* s, float* out, int64_t half) {
#pragma omp simd
  for (int64_t i = 0; i < half; ++i) out[i] = x[i] * c[i] + -x[i + half] * s[i];
#pragma omp simd
  for (int64_t i = half; i < 2 * half; ++i) out[i] = x[i] * c[i] + x[i - half] * s[i];
}

// The transpose: dx = g * c + rotate_half^T(g * s), rotate_half^T(y) = [y2, -y1].
XTRAIN_CPU_CLONES void rotate_row_back(const float* g, const float* c, const float* s, float* dx, int64_t half) {
#pragma omp simd
  for (int64_t i = 0; i < half; ++i) dx[i] = g[i] * c[i] + g[i + half] * s[i + half];
#pragma omp simd
  for (int64_t i = half; i < 2 * half; ++i) dx[i] = g[i] * c[i] + -(g[i - half] * s[i - half]);
}

// Applies `rotate` to every row of q and then of k, from `in` into `out`, in one parallel loop.
template <class Rotate>
void rotate_rows(const HeadRows (&in)[2], const HeadRows (&out)[2], int64_t batch, const float* c, const float* s,
                 int64_t d, const Rotate& rotate) {
  const int64_t q_rows = in[0].count(batch);
  at::parallel_for(0, q_rows + in[1].count(batch), cpu::grain_in_rows(d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int which = r < q_rows ? 0 : 1;
      const int64_t row = which == 0 ? r : r - q_rows, t = in[which].position(row);
      rotate(in[which].row(row), c + t * d, s + t * d, out[which].row(row), d / 2);
    }
  });
}

}  // namespace

void rotary_rows(const HeadRows (&in)[2], const HeadRows (&out)[2], int64_t batch, const float* cos, const float* sin,
                 int64_t d) {
  rotate_rows(in, out, batch, cos, sin, d, rotate_row);
}

void rotary_rows_backward(const HeadRows (&in)[2], const HeadRows (&out)[2], int64_t batch, const float* cos,
                          const float* sin, int64_t d) {
  rotate_rows(in, out, batch, cos, sin, d, rotate_row_back);
}

}  // namespace xtrain::model

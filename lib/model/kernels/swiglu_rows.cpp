#include "model/kernels/swiglu_rows.h"

#include <ATen/Parallel.h>

#include "util/cpu_kernel_support.h"

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

// Runs `rows_kernel(row)` over the rows in parallel, whole rows to a task.
template <class RowsKernel>
void for_rows(const SwigluRows& rows, const RowsKernel& rows_kernel) {
  at::parallel_for(0, rows.count, cpu::grain_in_rows(rows.width), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) rows_kernel(r);
  });
}

}  // namespace

void swiglu_rows(const SwigluRows& gate, const SwigluRows& up, float* out) {
  for_rows(gate, [&](int64_t r) {
    swiglu_elements(gate.data + r * gate.stride, up.data + r * up.stride, out + r * gate.width, gate.width);
  });
}

void swiglu_rows_backward(const float* dy, const SwigluRows& gate, const SwigluRows& up, float* dgate, float* dup) {
  for_rows(gate, [&](int64_t r) {
    const int64_t at = r * gate.width;
    swiglu_elements_backward(dy + at, gate.data + r * gate.stride, up.data + r * up.stride, dgate + at, dup + at,
                             gate.width);
  });
}

}  // namespace xtrain::model

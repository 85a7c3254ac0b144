#include "optim/adamw_elements.h"

#include <cmath>

#include "util/cpu_kernel_support.h"

namespace xtrain::optim {
namespace {

XTRAIN_CPU_CLONES void adamw_loop(float* p, const float* g, float* m, float* v, int64_t n, AdamWScalars s) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float decayed = p[i] * s.decay;
    const float m1 = m[i] * s.beta1 + g[i] * s.one_minus_beta1;
    const float v1 = v[i] * s.beta2 + g[i] * g[i] * s.one_minus_beta2;
    m[i] = m1;
    v[i] = v1;
    p[i] = decayed - s.step_size * (m1 / (std::sqrt(v1) / s.bias_correction2_sqrt + s.eps));
  }
}

}  // namespace

void adamw_elements(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s) {
  adamw_loop(p, g, m, v, n, s);
}

}  // namespace xtrain::optim

// The loop of the fused AdamW update (optim/fused_adamw.h) over a run of elements, in a file of
// its own without LibTorch: it compiles with -fno-math-errno, which lets the square roots
// vectorise but would not match the precompiled LibTorch header.
#pragma once
#include <cstdint>

namespace xtrain::optim {

// The per-step scalars, in fp32 as ATen's fp32 kernels take their double arguments.
struct AdamWScalars {
  float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, bias_correction2_sqrt, eps;
};

// p = p * decay - step_size * m' / (sqrt(v') / bias_correction2_sqrt + eps), with
// m' = beta1 m + (1 - beta1) g and v' = beta2 v + (1 - beta2) g^2 written back, element by element.
void adamw_elements(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s);

}  // namespace xtrain::optim

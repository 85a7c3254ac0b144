// What the fused CPU kernels share. One build runs on every x86-64 machine: each loop marked
// XTRAIN_CPU_CLONES is compiled for AVX-512, AVX2 + FMA and plain x86-64, and the CPU picks one at
// load time. Loops are vectorised by `omp simd` (the kernel files compile with -fopenmp-simd,
// which needs no OpenMP runtime), so a kernel's arithmetic must be plain expressions the compiler
// can vectorise: vector_exp stands in for std::exp, which it cannot.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define XTRAIN_CPU_CLONES __attribute__((target_clones("avx512f", "avx2,fma", "default")))
#else
#define XTRAIN_CPU_CLONES
#endif

namespace xtrain::cpu {

// Elements one task of at::parallel_for takes at least: enough to pay for waking a thread.
constexpr int64_t kGrainElements = 1 << 15;

// The same, in rows of `width` elements: at least one row.
inline int64_t grain_in_rows(int64_t width) { return std::max<int64_t>(1, kGrainElements / std::max<int64_t>(width, 1)); }

// e^x within one unit in the last place (0.99 at worst against std::exp in double, over every
// float of [-87, 88]): Cody and Waite's reduction to r = x - n ln 2, |r| <= ln 2 / 2, Cephes'
// polynomial for e^r, then 2^n put into the exponent bits. Inputs are clamped to [-87, 88], where
// 2^n stays a normal float: e^x flushes to about 1.6e-38 below and saturates to about 1.7e38
// above, finite either way; NaN stays NaN. The clamps vectorise only without trapping math
// (-fno-trapping-math: no code here reads the floating-point exception flags).
inline float vector_exp(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const auto exponent = static_cast<int32_t>(n) + 127;
  return p * __builtin_bit_cast(float, exponent << 23);
}

}  // namespace xtrain::cpu

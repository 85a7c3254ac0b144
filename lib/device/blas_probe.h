// Which BLAS LibTorch runs its CPU matmuls on, and how fast. LibTorch names it in its build
// configuration (the torch wheel: MKL, linked into libtorch_cpu, threaded by OpenMP like the
// rest of LibTorch, so torch::set_num_threads governs it).
#pragma once
#include <cstdint>
#include <string>

#include <c10/core/ScalarType.h>

namespace xtrain::util {

// BLAS_INFO of LibTorch's build configuration ("mkl", "open", ...), or "unknown".
std::string blas_library();

// A measured matmul rate: n x n x n products in one dtype, the median of several.
struct MatmulRate {
  int64_t n = 0;
  double gflops = 0;
};

// The rate at the largest power-of-two n up to `largest_n` whose product takes at most
// `seconds_per_product`: a dtype the CPU has no kernels for (bf16 without AVX512-BF16 runs at
// ~1 GFLOP/s, 2 s a 1024^3 product) is measured on a smaller product instead of for a minute.
MatmulRate measure_matmul_rate(c10::ScalarType dtype, int64_t largest_n = 1024, double seconds_per_product = 0.05);

}  // namespace xtrain::util

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

// Measured matmul rate (GFLOP/s) for an n x n x n product in `dtype`, median of `repeats`.
double measure_matmul_gflops(int64_t n, int repeats, c10::ScalarType dtype = c10::kFloat);

}  // namespace xtrain::util

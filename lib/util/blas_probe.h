// Which BLAS LibTorch is running on, and how fast it is. Debian's LibTorch links the
// generic libblas.so.3; unless OpenBLAS provides it, fp32 matmuls run about 40x slower.
#pragma once
#include <string>

#include <c10/core/ScalarType.h>

namespace xtrain::util {

struct BlasInfo {
  std::string library;  // resolved path of the library providing sgemm_, or ""
  bool optimized = false;  // an optimized implementation (OpenBLAS, MKL, BLIS) is loaded
};

BlasInfo loaded_blas();

// Measured matmul rate (GFLOP/s) for an n x n x n product in `dtype`, median of `repeats`.
double measure_matmul_gflops(int64_t n, int repeats, c10::ScalarType dtype = c10::kFloat);

// Sets the BLAS library's own thread count where it has one (OpenBLAS reads
// OPENBLAS_NUM_THREADS once at load and ignores LibTorch's setting), so that a thread count
// chosen for the run holds for every matmul. A no-op for other BLAS libraries.
void set_blas_threads(int threads);

// Prints a warning to stderr when the loaded BLAS is the slow reference one; returns true
// when it warned.
bool warn_if_slow_blas();

}  // namespace xtrain::util

#include "util/blas_probe.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

namespace xtrain::util {

BlasInfo loaded_blas() {
  // The library that resolves sgemm_ in the global scope is the one LibTorch's fp32 matmuls
  // call. Several BLAS libraries can be mapped at once (LAPACK pulls in OpenBLAS even when
  // libblas.so.3 is the reference one), so looking at what is mapped is not enough.
  BlasInfo info;
  void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_");
  Dl_info where{};
  if (sgemm == nullptr || dladdr(sgemm, &where) == 0 || where.dli_fname == nullptr) return info;
  char resolved[PATH_MAX];
  info.library = realpath(where.dli_fname, resolved) ? resolved : where.dli_fname;
  for (const char* fast : {"openblas", "mkl", "blis", "atlas"})
    if (info.library.find(fast) != std::string::npos) info.optimized = true;
  return info;
}

double measure_matmul_gflops(int64_t n, int repeats, c10::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  auto a = torch::randn({n, n}).to(dtype);
  auto b = torch::randn({n, n}).to(dtype);
  auto c = torch::mm(a, b);  // warm-up
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) {
    auto start = std::chrono::steady_clock::now();
    torch::mm_out(c, a, b);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return 2.0 * n * n * n / seconds[seconds.size() / 2] / 1e9;
}

bool warn_if_slow_blas() {
  auto info = loaded_blas();
  if (info.optimized) return false;
  fmt::print(stderr,
             "warning: LibTorch is using the reference BLAS ({}); fp32 matmuls run ~40x slower.\n"
             "         Install OpenBLAS: apt-get install libopenblas0-pthread\n",
             info.library.empty() ? "sgemm_ not found" : info.library);
  return true;
}

void set_blas_threads(int threads) {
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(threads);
}

}  // namespace xtrain::util

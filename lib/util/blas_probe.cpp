#include "util/blas_probe.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

namespace xtrain::util {

BlasInfo loaded_blas() {
  // Touch BLAS so that the lazily loaded library is mapped before we look.
  auto a = torch::ones({8, 8});
  (void)torch::mm(a, a);
  BlasInfo info;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    std::string file = path.substr(path.rfind('/') + 1);
    bool blas_like = file.find("blas") != std::string::npos || file.find("mkl") != std::string::npos ||
                     file.find("blis") != std::string::npos;
    if (!blas_like) continue;
    info.library = path;
    if (path.find("openblas") != std::string::npos || path.find("mkl") != std::string::npos ||
        path.find("blis") != std::string::npos) {
      info.optimized = true;
      break;
    }
  }
  return info;
}

double measure_matmul_gflops(int64_t n, int repeats) {
  torch::NoGradGuard no_grad;
  auto a = torch::randn({n, n});
  auto b = torch::randn({n, n});
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
             info.library.empty() ? "no BLAS library mapped" : info.library);
  return true;
}

}  // namespace xtrain::util

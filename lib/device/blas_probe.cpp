#include "device/blas_probe.h"

#include <algorithm>
#include <chrono>
#include <regex>
#include <vector>

#include <ATen/Version.h>
#include <torch/torch.h>

namespace xtrain::util {

std::string blas_library() {
  static const std::regex pattern("BLAS_INFO=([A-Za-z0-9_]+)");
  const std::string config = at::show_config();
  std::smatch match;
  return std::regex_search(config, match, pattern) ? match[1].str() : "unknown";
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
  return 2.0 * static_cast<double>(n * n * n) / seconds[seconds.size() / 2] / 1e9;
}

}  // namespace xtrain::util

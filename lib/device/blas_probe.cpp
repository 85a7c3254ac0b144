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

namespace {

double seconds_of_product(const torch::Tensor& a, const torch::Tensor& b, torch::Tensor& c) {
  const auto start = std::chrono::steady_clock::now();
  torch::mm_out(c, a, b);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

MatmulRate measure_matmul_rate(c10::ScalarType dtype, int64_t largest_n, double seconds_per_product) {
  torch::NoGradGuard no_grad;
  constexpr int kRepeats = 5;
  int64_t n = std::min<int64_t>(256, largest_n);
  for (;;) {
    const auto a = torch::randn({n, n}).to(dtype), b = torch::randn({n, n}).to(dtype);
    auto c = torch::mm(a, b);  // warm-up: the kernel's first call pays its set-up
    // The next size costs 8x: grow while that still fits the budget.
    if (2 * n <= largest_n && 8 * seconds_of_product(a, b, c) <= seconds_per_product) {
      n *= 2;
      continue;
    }
    std::vector<double> seconds;
    for (int i = 0; i < kRepeats; ++i) seconds.push_back(seconds_of_product(a, b, c));
    std::sort(seconds.begin(), seconds.end());
    return {n, 2.0 * static_cast<double>(n * n * n) / seconds[kRepeats / 2] / 1e9};
  }
}

}  // namespace xtrain::util

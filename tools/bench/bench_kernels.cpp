// Times each fused kernel against the unfused ops it replaces, forward and forward + backward, on
// the same tensors in alternating rounds of one process (so that both see the same machine), and
// prints one JSON line per kernel and shape: the medians and the unfused / fused ratios.
#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include "model/fused_rms_norm.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

double seconds_of(const std::function<void()>& work) {
  const auto start = Clock::now();
  work();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

torch::Tensor unfused_rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  return w * (x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps));
}

// Forward alone, and forward + backward, of `variant` on x [rows, d] and w [d].
struct Timing {
  std::vector<double> forward, step;
};
void time_round(const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>& variant,
                const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& grad, Timing& timing) {
  timing.forward.push_back(seconds_of([&] {
    torch::NoGradGuard no_grad;
    variant(x, w);
  }));
  timing.step.push_back(seconds_of([&] {
    auto y = variant(x, w);
    y.backward(grad);
  }));
  x.mutable_grad() = torch::Tensor();
  w.mutable_grad() = torch::Tensor();
}

void bench_rms_norm(int64_t rows, int64_t d, int rounds) {
  torch::manual_seed(0);
  auto x = torch::randn({rows, d}).requires_grad_(true);
  auto w = (1 + 0.1 * torch::randn({d})).requires_grad_(true);
  auto grad = torch::randn({rows, d});
  const double eps = 1e-6;
  Timing fused, unfused;
  for (int round = 0; round < rounds + 1; ++round) {  // round 0 warms up and is dropped
    Timing& first = round % 2 ? fused : unfused;
    Timing& second = round % 2 ? unfused : fused;
    auto run = [&](Timing& t) {
      if (&t == &fused)
        time_round([&](const auto& a, const auto& b) { return xtrain::model::fused_rms_norm(a, b, eps); }, x, w,
                   grad, t);
      else
        time_round([&](const auto& a, const auto& b) { return unfused_rms_norm(a, b, eps); }, x, w, grad, t);
    };
    run(first);
    run(second);
    if (round == 0) fused = unfused = Timing{};
  }
  const double f = median(fused.forward), u = median(unfused.forward);
  const double fs = median(fused.step), us = median(unfused.step);
  fmt::print(
      "{{\"kernel\": \"rms_norm\", \"rows\": {}, \"d\": {}, \"threads\": {}, \"rounds\": {}, "
      "\"fused_forward_ms\": {:.3f}, \"unfused_forward_ms\": {:.3f}, \"forward_speedup\": {:.2f}, "
      "\"fused_step_ms\": {:.3f}, \"unfused_step_ms\": {:.3f}, \"step_speedup\": {:.2f}}}\n",
      rows, d, torch::get_num_threads(), rounds, f * 1e3, u * 1e3, u / f, fs * 1e3, us * 1e3, us / fs);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 4096;
  std::vector<int64_t> widths{256, 768, 2048};
  int rounds = 21, threads = 0;
  CLI::App app{"Fused kernels against the unfused ops"};
  app.add_option("--rows", rows, "tokens per call");
  app.add_option("--widths", widths, "the rows' widths (hidden sizes)");
  app.add_option("--rounds", rounds, "timed rounds of each variant (median reported)");
  app.add_option("--threads", threads, "intra-op threads (0: LibTorch default)");
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) torch::set_num_threads(threads);
  for (int64_t d : widths) bench_rms_norm(rows, d, rounds);
  return 0;
}

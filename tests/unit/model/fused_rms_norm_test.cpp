// The fused RMSNorm kernel against the unfused ops: forward and both gradients within 1e-6 of the
// largest reference value, on widths that fill no whole vector register, row counts across the
// kernel's blocks, and a per-head norm's 4-d input (qwen3's q/k norms); no further from the fp64
// result than the unfused fp32 ops; the weight's gradient the same bit for bit on 1 and 2
// threads; and RMSNorm modules with the kernel on and off agree.
#include <catch2/catch.hpp>
#include <tuple>

#include <torch/torch.h>

#include "model/kernels/fused_rms_norm.h"
#include "model/layers/rms_norm.h"

using namespace xtrain;

namespace {

torch::Tensor unfused_rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  return w * (x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps));
}

double relative_error(const torch::Tensor& got, const torch::Tensor& want) {
  return (got - want).abs().max().item<double>() / want.abs().max().item<double>();
}

struct Result {
  torch::Tensor y, dx, dw;
};

template <class Norm>
Result run(const Norm& norm, const torch::Tensor& x0, const torch::Tensor& w0, const torch::Tensor& grad) {
  auto x = x0.clone().requires_grad_(true);
  auto w = w0.clone().requires_grad_(true);
  auto y = norm(x, w);
  y.backward(grad);
  return {y.detach(), x.grad(), w.grad()};
}

}  // namespace

TEST_CASE("fused RMSNorm matches the unfused ops, forward and backward", "[kernels]") {
  const double eps = 1e-6;
  for (const auto& shape : std::vector<std::vector<int64_t>>{{1, 1, 7}, {3, 37, 67}, {2, 65, 256}, {2, 5, 4, 32}}) {
    torch::manual_seed(shape.back());
    const auto x = torch::randn(shape) * 3;
    const auto w = 1 + 0.2 * torch::randn({shape.back()});
    const auto grad = torch::randn(shape);
    REQUIRE(model::fused_rms_norm_applies(x, w));
    const auto fused = run([&](const auto& a, const auto& b) { return model::fused_rms_norm(a, b, eps); }, x, w, grad);
    const auto unfused = run([&](const auto& a, const auto& b) { return unfused_rms_norm(a, b, eps); }, x, w, grad);
    INFO("shape [" << c10::IntArrayRef(shape) << "]");
    CHECK(relative_error(fused.y, unfused.y) < 1e-6);
    CHECK(relative_error(fused.dx, unfused.dx) < 1e-6);
    CHECK(relative_error(fused.dw, unfused.dw) < 1e-6);
  }
}

TEST_CASE("fused RMSNorm rounds no more than the unfused fp32 ops", "[kernels]") {
  // Against the same computation in fp64: the kernel accumulates its sums in fp64.
  torch::manual_seed(3);
  const std::vector<int64_t> shape{8, 64, 512};
  const auto x = torch::randn(shape) * 3, w = 1 + 0.2 * torch::randn({512}), grad = torch::randn(shape);
  auto unfused = [](const auto& a, const auto& b) { return unfused_rms_norm(a, b, 1e-6); };
  const auto exact = run(unfused, x.to(torch::kFloat64), w.to(torch::kFloat64), grad.to(torch::kFloat64));
  const auto fused = run([](const auto& a, const auto& b) { return model::fused_rms_norm(a, b, 1e-6); }, x, w, grad);
  const auto plain = run(unfused, x, w, grad);
  auto error = [&](const torch::Tensor& got, const torch::Tensor& want) {
    return (got.to(torch::kFloat64) - want).abs().max().item<double>();
  };
  INFO("fused / unfused errors: y " << error(fused.y, exact.y) << " / " << error(plain.y, exact.y) << ", dx "
                                    << error(fused.dx, exact.dx) << " / " << error(plain.dx, exact.dx) << ", dw "
                                    << error(fused.dw, exact.dw) << " / " << error(plain.dw, exact.dw));
  // y's error is mostly the last rounding of w * x * r, which both paths make: within a quarter
  // (ATen's default kernels give the unfused sum the edge on some data); the gradients' sums are
  // where the kernel's fp64 accumulation tells.
  CHECK(error(fused.y, exact.y) <= 1.25 * error(plain.y, exact.y));
  CHECK(error(fused.dx, exact.dx) <= error(plain.dx, exact.dx));
  CHECK(error(fused.dw, exact.dw) <= error(plain.dw, exact.dw));
}

TEST_CASE("fused RMSNorm's weight gradient does not depend on the thread count", "[kernels]") {
  torch::manual_seed(1);
  const auto x = torch::randn({300, 96}), w = torch::randn({96}), grad = torch::randn({300, 96});
  auto fused = [](const auto& a, const auto& b) { return model::fused_rms_norm(a, b, 1e-5); };
  const int threads = torch::get_num_threads();
  torch::set_num_threads(1);
  const auto one = run(fused, x, w, grad);
  torch::set_num_threads(2);
  const auto two = run(fused, x, w, grad);
  torch::set_num_threads(threads);
  CHECK(torch::equal(one.dw, two.dw));
  CHECK(torch::equal(one.dx, two.dx));
}

TEST_CASE("RMSNorm modules with the fused kernel on and off agree; other dtypes run unfused", "[kernels]") {
  torch::manual_seed(2);
  model::RMSNorm fused(48, 1e-6), unfused(48, 1e-6);
  fused->fused = true;
  CHECK_FALSE(unfused->fused);  // a model computes as transformers does, op for op, until told
  const auto w = 1 + 0.1 * torch::randn({48});
  for (auto* norm : {&fused, &unfused}) (*norm)->weight = w.clone().requires_grad_(true);
  const auto x = torch::randn({4, 9, 48});
  const auto grad = torch::randn({4, 9, 48});
  auto through = [&](model::RMSNorm& norm) {
    auto input = x.clone().requires_grad_(true);
    norm(input).backward(grad);
    return std::pair{input.grad(), norm->weight.grad()};
  };
  const auto [dx_fused, dw_fused] = through(fused);
  const auto [dx_unfused, dw_unfused] = through(unfused);
  CHECK(relative_error(dx_fused, dx_unfused) < 1e-6);
  CHECK(relative_error(dw_fused, dw_unfused) < 1e-6);
  CHECK_FALSE(model::fused_rms_norm_applies(x.to(torch::kBFloat16), w));
  CHECK_FALSE(model::fused_rms_norm_applies(x, torch::randn({47})));
}

TEST_CASE("fused add + RMSNorm matches the add and the unfused norm, forward and backward", "[kernels]") {
  const double eps = 1e-6;
  for (const auto& shape : std::vector<std::vector<int64_t>>{{1, 1, 7}, {3, 37, 67}, {2, 130, 256}}) {
    INFO("shape [" << c10::IntArrayRef(shape) << "]");
    torch::manual_seed(shape.back() + 1);
    const auto x0 = torch::randn(shape), a0 = torch::randn(shape) * 2, w0 = 1 + 0.2 * torch::randn({shape.back()});
    const auto dh_own = torch::randn(shape), dy = torch::randn(shape);  // h's own gradient, and the norm's
    auto through = [&](bool fused) {
      auto x = x0.clone().requires_grad_(true), a = a0.clone().requires_grad_(true);
      auto w = w0.clone().requires_grad_(true);
      torch::Tensor h, y;
      if (fused) {
        std::tie(h, y) = model::fused_add_rms_norm(x, a, w, eps);
      } else {
        h = x + a;
        y = unfused_rms_norm(h, w, eps);
      }
      torch::autograd::backward({h, y}, {dh_own, dy});
      return std::vector<torch::Tensor>{h.detach(), y.detach(), x.grad(), a.grad(), w.grad()};
    };
    const auto fused = through(true), plain = through(false);
    CHECK(torch::equal(fused[0], plain[0]));  // the sum itself is one rounding either way
    for (size_t i = 1; i < fused.size(); ++i) {
      INFO("output " << i << " (y, then the gradients of x, a and w)");
      CHECK(relative_error(fused[i], plain[i]) < 1e-6);
    }
    auto wrong = fused[2].clone();
    wrong.view(-1)[wrong.numel() / 2] += 2e-6 * plain[2].abs().max().item<float>();
    CHECK(relative_error(wrong, plain[2]) > 1e-6);
  }
  const auto x = torch::randn({2, 8});
  CHECK_FALSE(model::fused_add_rms_norm_applies(x, torch::randn({2, 7}), torch::ones({8})));
  CHECK_FALSE(model::fused_add_rms_norm_applies(x, x.to(torch::kFloat64), torch::ones({8})));
}

// bf16 GEMMs widened to fp32 (model/kernels/widened_gemm.h) against ATen's own bf16 GEMMs, forward and
// backward, under CPU autocast and on bf16 tensors: the same products, accumulated in fp32 in
// another order, so the bf16 results agree but for the last bit of a few elements.
#include <optional>

#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "model/kernels/widened_gemm.h"

using namespace xtrain;

namespace {

// The share of elements that differ, and the worst difference in units of bf16's last place
// (2^-8 of the larger magnitude).
struct Bf16Agreement {
  double differing = 0, worst_ulps = 0;
};

Bf16Agreement compare(const torch::Tensor& widened, const torch::Tensor& aten) {
  REQUIRE(widened.scalar_type() == aten.scalar_type());
  const auto a = widened.to(torch::kFloat64), b = aten.to(torch::kFloat64);
  const auto ulp = torch::maximum(a.abs(), b.abs()).clamp_min(1e-30) * std::ldexp(1.0, -8);
  return {a.ne(b).to(torch::kFloat64).mean().item<double>(), ((a - b).abs() / ulp).max().item<double>()};
}

void require_bf16_agreement(const std::string& what, const torch::Tensor& widened, const torch::Tensor& aten) {
  const auto agreement = compare(widened, aten);
  fmt::print("widened bf16 GEMM, {}: {:.2f}% of elements differ from ATen's bf16 GEMM, by at most {:.2f} ulp\n",
             what, 100 * agreement.differing, agreement.worst_ulps);
  CHECK(agreement.worst_ulps <= 2.0);
  CHECK(agreement.differing < 0.01);
}

struct AutocastBf16 {
  AutocastBf16() {
    at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
    at::autocast::set_autocast_enabled(at::kCPU, true);
  }
  ~AutocastBf16() {
    at::autocast::set_autocast_enabled(at::kCPU, false);
    at::autocast::clear_cache();
  }
};

// linear(x, w, b) with each path, and the fp32 leaves' gradients for one output gradient.
std::vector<torch::Tensor> linear_with_gradients(bool widen, bool autocast, int64_t batch_dims) {
  torch::manual_seed(5);
  const auto dtype = autocast ? torch::kFloat32 : torch::kBFloat16;
  auto x = (batch_dims == 1 ? torch::randn({111, 96}, dtype) : torch::randn({3, 37, 96}, dtype)).requires_grad_();
  auto w = (torch::randn({80, 96}, dtype) * 0.1).detach().requires_grad_();
  auto b = torch::randn({80}, dtype).requires_grad_();
  torch::Tensor y;
  {
    std::optional<AutocastBf16> autocast_scope;
    if (autocast) autocast_scope.emplace();
    model::Bf16GemmWideningScope scope(widen);
    y = model::widened_linear(x, w, b);
  }
  y.backward(torch::randn(y.sizes(), y.options()));
  return {y, x.grad(), w.grad(), b.grad()};
}

}  // namespace

TEST_CASE("a widened bf16 linear layer matches ATen's bf16 one, forward and backward", "[model][widened_gemm]") {
  const bool autocast = GENERATE(true, false);
  const int64_t batch_dims = GENERATE(1, 2);  // addmm with the bias inside, or a matmul and an add
  const auto widened = linear_with_gradients(true, autocast, batch_dims);
  const auto aten = linear_with_gradients(false, autocast, batch_dims);
  REQUIRE(widened[0].scalar_type() == torch::kBFloat16);
  const std::vector<std::string> names{"output", "input gradient", "weight gradient", "bias gradient"};
  for (size_t i = 0; i < names.size(); ++i)
    require_bf16_agreement(fmt::format("linear {} ({}, {}-d input)", names[i], autocast ? "autocast" : "bf16 tensors",
                                       batch_dims + 1),
                           widened[i], aten[i]);
}

TEST_CASE("widened bf16 matmul and mm match ATen's, batched as attention multiplies", "[model][widened_gemm]") {
  torch::manual_seed(6);
  const auto q = torch::randn({2, 4, 33, 16}, torch::kBFloat16), k = torch::randn({2, 4, 16, 29}, torch::kBFloat16);
  const auto a = torch::randn({45, 64}, torch::kBFloat16), b = torch::randn({64, 70}, torch::kBFloat16);
  torch::Tensor scores[2], product[2];
  for (const bool widen : {true, false}) {
    model::Bf16GemmWideningScope scope(widen);
    scores[widen] = model::widened_matmul(q, k);
    product[widen] = model::widened_mm(a, b);
  }
  require_bf16_agreement("batched matmul", scores[1], scores[0]);
  require_bf16_agreement("mm", product[1], product[0]);
}

TEST_CASE("only bf16 GEMMs on the CPU are widened", "[model][widened_gemm]") {
  model::Bf16GemmWideningScope scope(true);
  CHECK(model::widens_bf16_gemm(torch::ones({2, 2}, torch::kBFloat16)));
  CHECK_FALSE(model::widens_bf16_gemm(torch::ones({2, 2}, torch::kFloat32)));
  CHECK_FALSE(model::widens_bf16_gemm(torch::ones({2, 2}, torch::kHalf)));
  {
    AutocastBf16 autocast;
    CHECK(model::widens_bf16_gemm(torch::ones({2, 2}, torch::kFloat32)));
    CHECK_FALSE(model::widens_bf16_gemm(torch::ones({2, 2}, torch::kFloat64)));
  }
  model::Bf16GemmWideningScope aten(false);
  CHECK_FALSE(model::widens_bf16_gemm(torch::ones({2, 2}, torch::kBFloat16)));
}

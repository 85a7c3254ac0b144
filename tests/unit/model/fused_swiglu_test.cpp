// The fused SwiGLU kernel against the unfused ops (torch::silu(gate) * up): forward and both
// gradients within 1e-6 of the largest reference value, on contiguous tensors, on the gate and up
// halves of one matmul's output (as a mixture of experts' experts hand them over), on lengths that
// fill no whole vector register, and through an MLP module with the kernel on and off; and the
// comparison shown to catch an error of 2e-6. cpu::vector_exp against std::exp in double.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include <torch/torch.h>

#include "util/cpu_kernel_support.h"
#include "model/kernel_choice.h"
#include "model/kernels/fused_swiglu.h"
#include "model/layers/swiglu.h"
#include "tensor_compare.h"

using namespace xtrain;
using testing::max_relative_error;

namespace {

struct SwiGLUResult {
  torch::Tensor out, dgate, dup;
};

// out, d gate and d up of `swiglu` at gate_up's halves, for the upstream gradient `grad`.
template <class SwiGLU>
SwiGLUResult run_swiglu(const SwiGLU& swiglu, const torch::Tensor& gate_up0, const torch::Tensor& grad) {
  auto gate_up = gate_up0.clone().requires_grad_(true);
  const auto halves = gate_up.chunk(2, -1);
  auto out = swiglu(halves[0], halves[1]);
  out.backward(grad);
  const auto g = gate_up.grad().chunk(2, -1);
  return {out.detach(), g[0], g[1]};
}

torch::Tensor unfused_swiglu(const torch::Tensor& gate, const torch::Tensor& up) { return torch::silu(gate) * up; }

}  // namespace

TEST_CASE("fused SwiGLU matches silu(gate) * up, forward and backward", "[kernels]") {
  for (const auto& shape : std::vector<std::vector<int64_t>>{{1, 14}, {3, 37, 134}, {2, 65, 512}, {5, 2, 96}}) {
    INFO("gate and up [" << c10::IntArrayRef(shape) << "], halves of one tensor and contiguous copies");
    torch::manual_seed(shape.back());
    const auto gate_up = torch::randn(shape) * 4;  // the sigmoid's tails as well as its middle
    auto half_shape = shape;
    half_shape.back() /= 2;
    const auto grad = torch::randn(half_shape);
    const auto reference = run_swiglu(unfused_swiglu, gate_up, grad);
    const auto halves = run_swiglu(model::fused_swiglu, gate_up, grad);
    const auto contiguous = run_swiglu([](const auto& g, const auto& u) { return model::fused_swiglu(g.contiguous(), u.contiguous()); },
                                gate_up, grad);
    for (const auto* fused : {&halves, &contiguous}) {
      CHECK(max_relative_error(fused->out, reference.out) < 1e-6);
      CHECK(max_relative_error(fused->dgate, reference.dgate) < 1e-6);
      CHECK(max_relative_error(fused->dup, reference.dup) < 1e-6);
    }
    // The measure catches an error ten times the tolerance's size in one element.
    auto wrong = halves.dgate.clone();
    wrong.view(-1)[wrong.numel() / 2] += 2e-5 * reference.dgate.abs().max().item<float>();
    CHECK(max_relative_error(wrong, reference.dgate) > 1e-6);
  }
}

TEST_CASE("an MLP gives the same output and gradients with the fused SwiGLU kernel as without", "[kernels]") {
  torch::manual_seed(5);
  model::SwiGLU mlp(48, 100);
  for (auto& p : mlp->parameters()) p.set_data(0.3 * torch::randn(p.sizes()));
  const auto x = torch::randn({2, 9, 48});
  auto outputs = [&](bool fused) {
    model::use_fused_kernels(*mlp, fused);
    mlp->zero_grad();
    auto y = mlp->forward(x);
    y.square().sum().backward();
    return std::vector<torch::Tensor>{y.detach(), mlp->gate_proj->weight.grad().clone(),
                                      mlp->up_proj->weight.grad().clone(), mlp->down_proj->weight.grad().clone()};
  };
  const auto fused = outputs(true), plain = outputs(false);
  REQUIRE(mlp->fused == false);
  for (size_t i = 0; i < fused.size(); ++i) {
    INFO("output " << i << " (y, then the gradients of gate, up and down)");
    CHECK(max_relative_error(fused[i], plain[i]) < 1e-6);
    CHECK(!torch::equal(fused[i], plain[i]));  // the kernel ran: its exp rounds otherwise
  }
}

TEST_CASE("vector_exp is within one rounding of e^x and keeps NaN and the ends finite", "[kernels]") {
  double worst = 0;  // relative to e^x of the float x, in double
  for (int i = 0; i <= 200000; ++i) {
    const float x = -87.0f + 175.0f * static_cast<float>(i) / 200000.0f;
    const double exact = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(xtrain::cpu::vector_exp(x) - exact) / exact);
  }
  CHECK(worst < 1.5 * std::numeric_limits<float>::epsilon());
  CHECK(std::isnan(xtrain::cpu::vector_exp(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isfinite(xtrain::cpu::vector_exp(1000.0f)));
  CHECK(xtrain::cpu::vector_exp(-1000.0f) >= 0.0f);
}

// The one-pass AdamW update against the multi-tensor ops of optim::AdamW: parameters and both
// moments within 1e-6 of the largest reference value after five steps, decayed and not, on sizes
// that fill no whole vector register; a parameter the kernel does not take (fp64, or a strided
// view) still updated, by the multi-tensor ops; and the comparison shown to catch an error of
// 2e-6.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include "optim/adamw.h"
#include "optim/fused_adamw.h"
#include "tensor_compare.h"

using namespace xtrain;

namespace {

// Five steps of AdamW over copies of `initial`, fused or not; the parameters and the state after.
std::map<std::string, torch::Tensor> five_steps(const std::vector<torch::Tensor>& initial,
                                                const std::vector<torch::Tensor>& grads, bool fused) {
  std::vector<optim::NamedParameter> parameters;
  for (size_t i = 0; i < initial.size(); ++i)
    parameters.push_back({"p" + std::to_string(i), initial[i].clone(), /*decay=*/i % 2 == 0});
  optim::AdamW adamw(parameters, {0.9, 0.95, 1e-8, 0.1, fused});
  for (int step = 1; step <= 5; ++step) {
    for (size_t i = 0; i < parameters.size(); ++i) parameters[i].tensor.mutable_grad() = grads[i] * step;
    adamw.step(1e-2);
  }
  auto state = adamw.state();
  for (const auto& p : parameters) state["param." + p.name] = p.tensor;
  return state;
}

}  // namespace

TEST_CASE("fused AdamW matches the multi-tensor AdamW over five steps", "[kernels][optim]") {
  torch::manual_seed(4);
  std::vector<torch::Tensor> initial, grads;
  for (int64_t n : {1, 7, 100, 4099, 70000}) {
    initial.push_back(torch::randn({n}));
    grads.push_back(torch::randn({n}) * 1e-3);
  }
  initial.push_back(torch::randn({16, 33}));  // a matrix, decayed
  grads.push_back(torch::randn({16, 33}));
  REQUIRE(optim::fused_adamw_applies(initial[0], grads[0], initial[0], initial[0]));
  const auto fused = five_steps(initial, grads, true), reference = five_steps(initial, grads, false);
  REQUIRE(fused.size() == reference.size());
  for (const auto& [name, tensor] : reference) {
    if (name == "step") continue;
    INFO(name);
    CHECK(testing::max_relative_error(fused.at(name), tensor) < 1e-6);
  }
  CHECK(!torch::equal(fused.at("param.p0"), initial[0]));
  const auto& p4 = reference.at("param.p4");
  auto wrong = fused.at("param.p4").clone();
  wrong[1000] += 2e-6 * p4.abs().max().item<float>();
  CHECK(testing::max_relative_error(wrong, p4) > 1e-6);
}

TEST_CASE("fused AdamW leaves what it does not take to the multi-tensor ops", "[kernels][optim]") {
  torch::manual_seed(5);
  const auto wide = torch::randn({6, 8}, torch::kFloat64);
  const auto strided = torch::randn({8, 6}).t();  // not contiguous
  CHECK_FALSE(optim::fused_adamw_applies(wide, wide, wide, wide));
  CHECK_FALSE(optim::fused_adamw_applies(strided, strided, strided, strided));
  std::vector<torch::Tensor> initial{wide, strided}, grads{torch::randn({6, 8}, torch::kFloat64), torch::randn({8, 6}).t()};
  const auto fused = five_steps(initial, grads, true), reference = five_steps(initial, grads, false);
  for (const auto& [name, tensor] : reference)
    if (name != "step") CHECK(torch::equal(fused.at(name), tensor));
}

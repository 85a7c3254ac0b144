#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <limits>

#include "optim/loss_scaler.h"

using namespace xtrain;

namespace {

torch::Tensor parameter_with_grad(std::vector<float> grad) {
  auto p = torch::zeros({static_cast<int64_t>(grad.size())}, torch::requires_grad());
  p.mutable_grad() = torch::tensor(grad);
  return p;
}

}  // namespace

TEST_CASE("unscale divides gradients by the scale and reports overflow", "[optim][fp16]") {
  optim::DynamicLossScaler scaler({1024.0, 2.0, 0.5, 3});
  auto a = parameter_with_grad({1024.0f, -2048.0f});
  auto b = torch::zeros({1}, torch::requires_grad());  // no gradient: ignored
  CHECK(scaler.unscale({a, b}));
  CHECK(torch::equal(a.grad(), torch::tensor({1.0f, -2.0f})));

  auto c = parameter_with_grad({1.0f, std::numeric_limits<float>::infinity()});
  CHECK_FALSE(scaler.unscale({a, c}));
  auto d = parameter_with_grad({std::numeric_limits<float>::quiet_NaN()});
  CHECK_FALSE(scaler.unscale({d}));
}

TEST_CASE("the scale backs off on overflow and grows after growth_interval finite steps", "[optim][fp16]") {
  optim::DynamicLossScaler scaler({1024.0, 2.0, 0.5, 3});
  scaler.update(false);
  CHECK(scaler.scale() == 512.0);
  scaler.update(true);
  scaler.update(true);
  CHECK(scaler.scale() == 512.0);
  scaler.update(false);  // an overflow restarts the count
  CHECK(scaler.scale() == 256.0);
  scaler.update(true);
  scaler.update(true);
  scaler.update(true);
  CHECK(scaler.scale() == 512.0);
  CHECK(scaler.state().finite_steps == 0);

  optim::DynamicLossScaler resumed({1.0, 2.0, 0.5, 3});
  scaler.update(true);
  resumed.load_state(scaler.state());
  resumed.update(true);
  resumed.update(true);
  CHECK(resumed.scale() == 1024.0);
}

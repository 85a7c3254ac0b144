#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <cmath>

#include "model/kernels/fp16_emulation.h"
#include "model/layers/linear.h"
#include "model/layers/parameter_source.h"

using namespace xtrain;

TEST_CASE("fp16 emulation rounds projections to fp16 precision and range, gradients included", "[model][fp16]") {
  model::Linear layer(2, 1, /*bias=*/false);
  model::materialize(*layer, [](const std::string&, int64_t, int64_t count) { return torch::ones({count}); });
  const float fine = 1.0f + 1.0f / 4096;  // not an fp16 number: rounds to 1
  {
    model::Fp16EmulationScope fp16;
    CHECK(layer(torch::tensor({{fine, 2.0f}})).item<float>() == 3.0f);
    CHECK(std::isinf(layer(torch::tensor({{40000.0f, 40000.0f}})).item<float>()));
    auto x = torch::tensor({{1.0f, 2.0f}}, torch::requires_grad());
    layer(x).backward(torch::full({1, 1}, 70000.0f));  // a loss-scaled gradient
    CHECK(std::isinf(x.grad()[0][0].item<float>()));
    CHECK(std::isinf(layer->weight.grad()[0][0].item<float>()));
  }
  CHECK_FALSE(model::fp16_emulation_enabled());
  CHECK(layer(torch::tensor({{fine, 2.0f}})).item<float>() == 2.0f + fine);
}

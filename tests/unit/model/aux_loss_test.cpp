// attach_loss: the block's output is unchanged, and backward gives the attached loss the
// gradient weight, as if weight * loss were part of the objective.
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "model/layers/aux_loss.h"

using namespace xtrain;

TEST_CASE("an attached loss gets its gradient in the backward of the output it rides on", "[model][moe]") {
  auto x = torch::tensor({1.0f, -2.0f, 3.0f}, torch::requires_grad());
  auto w = torch::tensor({0.5f, 4.0f}, torch::requires_grad());
  const auto y = model::attach_loss(x * 2, w.square().sum(), 0.25);
  CHECK(torch::equal(y.detach(), torch::tensor({2.0f, -4.0f, 6.0f})));
  (y * torch::tensor({1.0f, 10.0f, 100.0f})).sum().backward();
  CHECK(torch::equal(x.grad(), torch::tensor({2.0f, 20.0f, 200.0f})));
  // d(0.25 * sum(w^2)) / dw = 0.5 w
  CHECK(torch::allclose(w.grad(), torch::tensor({0.25f, 2.0f})));
}

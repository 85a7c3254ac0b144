#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "model/layers/linear.h"
#include "model/layers/parameter_source.h"
#include "model/layers/weight_grad_store.h"

namespace {

xtrain::model::Linear seeded_linear(bool bias) {
  xtrain::model::Linear linear(5, 3, bias);
  torch::manual_seed(11);
  const auto values = torch::randn({64});
  xtrain::model::materialize(*linear, [&](const std::string&, int64_t begin, int64_t count) {
    return values.narrow(0, begin, count);
  });
  return linear;
}

}  // namespace

TEST_CASE("WeightGradStore: a Linear's backward gives the input's and bias's gradients, its W the weight's",
          "[weight_grad_store]") {
  using xtrain::model::WeightGradStore;
  const auto x = torch::randn({2, 4, 5});
  const auto upstream = torch::randn({2, 4, 3});
  auto plain = seeded_linear(true), split = seeded_linear(true);
  auto x_plain = x.clone().requires_grad_(true), x_split = x.clone().requires_grad_(true);
  plain->forward(x_plain).backward(upstream);

  WeightGradStore store;
  torch::Tensor y;
  {
    WeightGradStore::Scope scope(store);
    y = split->forward(x_split);
  }
  y.backward(upstream);
  CHECK(torch::allclose(x_split.grad(), x_plain.grad(), 1e-6, 1e-6));
  CHECK(torch::allclose(split->bias.grad(), plain->bias.grad(), 1e-6, 1e-6));
  CHECK_FALSE(split->weight.grad().defined());  // B: the weight's gradient waits
  auto records = store.take();
  REQUIRE(records.size() == 1);
  CHECK(store.take().empty());
  for (const auto& record : records) record.run();  // W
  CHECK(torch::allclose(split->weight.grad(), plain->weight.grad(), 1e-6, 1e-6));
  for (const auto& record : records) record.run();  // a second micro batch's accumulates
  CHECK(torch::allclose(split->weight.grad(), 2 * plain->weight.grad(), 1e-6, 1e-6));
}

TEST_CASE("WeightGradStore: without a store, or without grad mode, a Linear runs as always", "[weight_grad_store]") {
  using xtrain::model::WeightGradStore;
  auto linear = seeded_linear(false);
  const auto x = torch::randn({3, 5});
  CHECK_FALSE(WeightGradStore::defers(x, linear->weight));
  WeightGradStore store;
  WeightGradStore::Scope scope(store);
  CHECK(WeightGradStore::defers(x, linear->weight));
  CHECK_FALSE(WeightGradStore::defers(x, linear->weight * 2));  // not a leaf: a view's gradient flows back
  torch::NoGradGuard no_grad;
  CHECK_FALSE(WeightGradStore::defers(x, linear->weight));
}

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "model/layers/linear.h"
#include "model/layers/parameter_source.h"

namespace {

constexpr int64_t kRows = 11, kDim = 6;

// An Embedding filled with seeded values, and ids with repeats and the padding row among them.
xtrain::model::Embedding seeded_embedding(int64_t padding_idx) {
  xtrain::model::Embedding embedding(kRows, kDim);
  embedding->padding_idx = padding_idx;
  torch::manual_seed(7);
  const auto values = torch::randn({kRows * kDim});
  xtrain::model::materialize(*embedding, [&](const std::string&, int64_t begin, int64_t count) {
    return values.narrow(0, begin, count);
  });
  return embedding;
}

const torch::Tensor& ids() {
  static const auto value = torch::tensor({{3, 1, 3, 0, 9}, {1, 1, 2, 3, 10}}, torch::kLong);
  return value;
}

// The table's gradient of sum(lookup * weights), after `earlier` was already in .grad.
torch::Tensor table_grad(xtrain::model::Embedding& embedding, const torch::Tensor& earlier) {
  if (earlier.defined()) embedding->weight.mutable_grad() = earlier.clone();
  torch::manual_seed(8);
  const auto weights = torch::randn({2, 5, kDim});
  (embedding(ids()) * weights).sum().backward();
  return embedding->weight.grad();
}

}  // namespace

TEST_CASE("an Embedding that accumulates in place adds the looked-up rows to the existing .grad", "[embedding]") {
  const int64_t padding_idx = GENERATE(-1, 1);
  CAPTURE(padding_idx);
  const auto earlier = torch::randn({kRows, kDim});
  auto plain = seeded_embedding(padding_idx);
  const auto expected = table_grad(plain, earlier);

  auto in_place = seeded_embedding(padding_idx);
  xtrain::model::accumulate_lookup_grads_in_place(*in_place);
  CHECK(in_place->accumulate_grad_in_place);
  in_place->weight.mutable_grad() = earlier.clone();
  const auto buffer = in_place->weight.grad();
  const auto actual = table_grad(in_place, torch::Tensor());
  CHECK(actual.data_ptr() == buffer.data_ptr());  // the same buffer, added to in place
  CHECK(torch::allclose(actual, expected, 1e-6, 1e-6));
  // Rows no id looked up are untouched, bit for bit.
  for (int64_t row : {4, 5, 6, 7, 8}) CHECK(torch::equal(actual[row], earlier[row]));
  if (padding_idx >= 0) CHECK(torch::equal(actual[padding_idx], earlier[padding_idx]));

  SECTION("without an existing .grad the dense gradient goes to autograd, as torch::embedding's") {
    auto fresh = seeded_embedding(padding_idx);
    xtrain::model::accumulate_lookup_grads_in_place(*fresh);
    auto reference = seeded_embedding(padding_idx);
    CHECK(torch::equal(table_grad(fresh, torch::Tensor()), table_grad(reference, torch::Tensor())));
  }
}

// train/dropout_key.h: a token's identity in the dropout key is its sample and position,
// whether its sample is a row of its own or a piece of a packed row.
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "train/dropout_key.h"

TEST_CASE("dropout_key: each token is its sample index * seq_len + position, packed or not", "[dropout]") {
  xtrain::data::MicroBatch rows;
  rows.inputs = torch::zeros({2, 4}, torch::kLong);
  rows.sample_ids = torch::tensor({5, 9}, torch::kLong);
  const auto key = xtrain::train::dropout_key(rows, 3, 11, torch::kCPU);
  CHECK(key.seed == 3);
  CHECK(key.step == 11);
  CHECK(torch::equal(key.tokens, torch::tensor({{20, 21, 22, 23}, {36, 37, 38, 39}}, torch::kLong)));
  xtrain::data::MicroBatch packed = rows;
  packed.inputs = torch::zeros({1, 8}, torch::kLong);
  CHECK(torch::equal(xtrain::train::dropout_key(packed, 3, 11, torch::kCPU).tokens, key.tokens.reshape({1, 8})));
  CHECK(!xtrain::train::dropout_key(xtrain::data::MicroBatch{}, 3, 11, torch::kCPU).defined());
}

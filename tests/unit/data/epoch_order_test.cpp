#include <catch2/catch.hpp>

#include <stdexcept>
#include <thread>
#include <vector>

#include "data/epoch_order.h"
#include "data/permutation.h"

using xtrain::data::EpochOrder;
using xtrain::data::random_permutation;

TEST_CASE("an epoch order reads each epoch's seeded permutation", "[data]") {
  const EpochOrder order(11, true);
  for (int64_t epoch : {0, 1, 2, 0}) {  // back to an epoch read before: the same permutation
    const auto expected = random_permutation(7, 11, static_cast<uint64_t>(epoch));
    for (int64_t i = 0; i < 7; ++i) CHECK(order.sample(epoch * 7 + i, 7) == expected[static_cast<size_t>(i)]);
  }
  // Another dataset size with the same epoch is another permutation, not the kept one.
  CHECK(order.sample(3, 5) == random_permutation(5, 11, 0)[3]);
}

TEST_CASE("an unshuffled epoch order reads positions in turn", "[data]") {
  const EpochOrder order(11, false);
  CHECK(order.sample(0, 4) == 0);
  CHECK(order.sample(9, 4) == 1);
  CHECK_THROWS_AS(order.sample(-1, 4), std::out_of_range);
  CHECK_THROWS_AS(order.sample(0, 0), std::out_of_range);
}

TEST_CASE("threads reading different epochs each see their own epoch's order", "[data]") {
  // Loader threads share a dataset: two threads alternating epochs 0 and 1 must never read a
  // sample from the other epoch's permutation.
  const EpochOrder order(5, true);
  const int64_t n = 50;
  std::vector<std::vector<int64_t>> expected{random_permutation(n, 5, 0), random_permutation(n, 5, 1)};
  std::vector<int> mismatches(2, 0);
  auto read = [&](int thread) {
    for (int round = 0; round < 200; ++round)
      for (int64_t epoch = 0; epoch < 2; ++epoch) {
        const int64_t e = (epoch + thread) % 2;
        const int64_t i = (round * 7 + thread) % n;
        if (order.sample(e * n + i, n) != expected[static_cast<size_t>(e)][static_cast<size_t>(i)]) ++mismatches[thread];
      }
  };
  std::thread a(read, 0), b(read, 1);
  a.join();
  b.join();
  CHECK(mismatches == std::vector<int>{0, 0});
}

#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>

#include "data/permutation.h"

using xtrain::data::random_permutation;
using xtrain::data::SplitMix64;

TEST_CASE("SplitMix64 matches the reference sequence", "[data]") {
  // First outputs of the reference implementation (Vigna's splitmix64.c) seeded with 0.
  SplitMix64 rng(0);
  CHECK(rng.next() == 0xe220a8397b1dcdafULL);
  CHECK(rng.next() == 0x6e789e6aa1b965f4ULL);
  CHECK(rng.next() == 0x06c45d188009454fULL);
}

TEST_CASE("bounded draws stay in range and cover it", "[data]") {
  SplitMix64 rng(7);
  std::vector<int> hits(6, 0);
  for (int i = 0; i < 6000; ++i) {
    const uint64_t r = rng.below(6);
    REQUIRE(r < 6);
    ++hits[r];
  }
  for (int h : hits) CHECK(h > 800);  // expected 1000 each
  CHECK(rng.below(1) == 0);
}

TEST_CASE("random_permutation is a seeded permutation", "[data]") {
  const auto a = random_permutation(100, 42, 0);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(100);
  std::iota(identity.begin(), identity.end(), 0);
  CHECK(sorted == identity);
  CHECK(a != identity);

  CHECK(random_permutation(100, 42, 0) == a);
  CHECK(random_permutation(100, 43, 0) != a);
  CHECK(random_permutation(100, 42, 1) != a);
  // (seed, stream) pairs are not interchangeable.
  CHECK(random_permutation(100, 1, 0) != random_permutation(100, 0, 1));

  CHECK(random_permutation(0, 1, 0).empty());
  CHECK(random_permutation(1, 1, 0) == std::vector<int64_t>{0});
}

TEST_CASE("random_permutation is pinned", "[data]") {
  // The sample order of every run depends on these values (resuming a run must replay it), so
  // a change here breaks resume across versions. Computed by an independent implementation.
  CHECK(random_permutation(10, 1234, 0) == std::vector<int64_t>{4, 5, 0, 8, 3, 6, 7, 9, 1, 2});
  CHECK(random_permutation(10, 1234, 1) == std::vector<int64_t>{8, 4, 5, 0, 7, 3, 2, 6, 9, 1});
}

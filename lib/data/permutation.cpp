#include "data/permutation.h"

#include <cstddef>
#include <numeric>
#include <utility>

namespace xtrain::data {

uint64_t SplitMix64::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t SplitMix64::below(uint64_t bound) {
  // Reject the lowest 2^64 mod bound values so that every residue is equally likely.
  const uint64_t threshold = -bound % bound;
  uint64_t r;
  do r = next();
  while (r < threshold);
  return r % bound;
}

std::vector<int64_t> random_permutation(int64_t n, uint64_t seed, uint64_t stream) {
  // Hash (seed, stream) into the starting state so that nearby pairs such as (1, 0) and
  // (0, 1) give unrelated sequences rather than shifted copies of one another.
  SplitMix64 rng(SplitMix64(SplitMix64(seed).next() + stream).next());
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i) + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

}  // namespace xtrain::data

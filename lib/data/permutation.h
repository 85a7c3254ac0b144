// Seeded permutations that are identical on every platform and standard library: the sample
// order of a run must not change when it is resumed on another machine. (std::shuffle and
// std::uniform_int_distribution are implementation-defined, so they are not used.)
#pragma once
#include <cstdint>
#include <vector>

namespace xtrain::data {

// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, passes BigCrush, any seed is fine.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next();
  // Uniform in [0, bound), bound > 0, without modulo bias.
  uint64_t below(uint64_t bound);

 private:
  uint64_t state_;
};

// A uniformly random permutation of 0 .. n-1 (Fisher-Yates), a pure function of (seed, stream).
std::vector<int64_t> random_permutation(int64_t n, uint64_t seed, uint64_t stream);

}  // namespace xtrain::data

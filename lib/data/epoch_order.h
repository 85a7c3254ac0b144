// EpochOrder: the order in which a dataset of n samples is read, epoch after epoch. Global index
// g reads position g % n of epoch g / n; shuffled, that position holds
// random_permutation(n, seed, epoch)[g % n], so the order is a pure function of (seed, g) and a
// resumed run reads what the uninterrupted one would have. Thread-safe (loader threads share a
// dataset); the permutation of the epoch last read is kept, so reading in order shuffles once an
// epoch.
#pragma once
#include <cstdint>
#include <mutex>
#include <vector>

namespace xtrain::data {

class EpochOrder {
 public:
  EpochOrder(uint64_t seed, bool shuffle) : seed_(seed), shuffle_(shuffle) {}

  // The sample read at global_index (>= 0) of a dataset of n (> 0) samples.
  int64_t sample(int64_t global_index, int64_t n) const;

 private:
  uint64_t seed_;
  bool shuffle_;
  mutable std::mutex mutex_;
  mutable int64_t epoch_ = -1;  // the epoch permutation_ belongs to
  mutable std::vector<int64_t> permutation_;
};

}  // namespace xtrain::data

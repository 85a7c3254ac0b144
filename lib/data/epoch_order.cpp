#include "data/epoch_order.h"

#include <stdexcept>
#include <string>

#include "data/permutation.h"

namespace xtrain::data {

int64_t EpochOrder::sample(int64_t global_index, int64_t n) const {
  if (global_index < 0 || n <= 0)
    throw std::out_of_range("sample index " + std::to_string(global_index) + " of a dataset of " + std::to_string(n) +
                            " samples");
  const int64_t epoch = global_index / n;
  const int64_t position = global_index % n;
  if (!shuffle_) return position;
  std::lock_guard lock(mutex_);
  if (epoch != epoch_ || static_cast<int64_t>(permutation_.size()) != n) {
    permutation_ = random_permutation(n, seed_, static_cast<uint64_t>(epoch));
    epoch_ = epoch;
  }
  return permutation_[static_cast<size_t>(position)];
}

}  // namespace xtrain::data

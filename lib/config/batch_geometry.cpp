#include "config/batch_geometry.h"

#include <fmt/format.h>

namespace xtrain::config {
namespace {

// The settings closest to the recipe's that divide: a smaller micro batch (same global batch,
// more accumulation) where one exists, and the next global batch up for this micro batch.
std::string fits(int64_t global_batch_size, int64_t micro_batch_size, int64_t data_ranks) {
  const int64_t unit = micro_batch_size * data_ranks;
  const int64_t next_global = (global_batch_size / unit + 1) * unit;
  if (global_batch_size % data_ranks == 0)
    for (int64_t micro = micro_batch_size - 1; micro >= 1; --micro)
      if (global_batch_size % (micro * data_ranks) == 0)
        return fmt::format("set train.micro_batch_size to {}, or train.global_batch_size to {}", micro, next_global);
  return fmt::format("set train.global_batch_size to a multiple of {} (e.g. {}), or run on a number of "
                     "data-parallel ranks that divides it",
                     unit, next_global);
}

}  // namespace

std::optional<std::string> batch_geometry_problem(int64_t global_batch_size, int64_t micro_batch_size,
                                                  int64_t data_ranks) {
  const int64_t unit = micro_batch_size * data_ranks;
  if (global_batch_size % unit == 0) return std::nullopt;
  return fmt::format(
      "{} must be a multiple of train.micro_batch_size ({}) x data-parallel ranks ({}) = {}; the global batch does "
      "not depend on the number of ranks: {}",
      global_batch_size, micro_batch_size, data_ranks, unit, fits(global_batch_size, micro_batch_size, data_ranks));
}

}  // namespace xtrain::config

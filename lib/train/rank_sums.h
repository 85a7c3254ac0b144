// Sums of host figures over every rank, so that all ranks take the same decisions (skip a step,
// stop, save) and report the same numbers. One all-reduce each, on the device the backend
// reduces (NCCL: the GPU); with one process, the value itself.
#pragma once
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <c10/core/Device.h>

#include "parallel/comm.h"

namespace xtrain::train {

// A per-rank figure over the ranks: its mean, its maximum and the rank that holds it.
struct RankSpread {
  double mean = 0, max = 0;
  int64_t argmax = 0;
};

class RankSums {
 public:
  RankSums(std::shared_ptr<parallel::Comm> world, torch::Device device);

  double sum(double value);
  // Element by element, in one all-reduce.
  std::vector<double> sum(std::vector<double> values);
  // The sum of `summed`, and the spread of `per_rank`.
  std::pair<double, RankSpread> sum_and_spread(double summed, double per_rank);
  // The sum of `summed`, and the spread of each figure of `per_rank`, in one all-reduce.
  std::pair<double, std::vector<RankSpread>> sum_and_spreads(double summed, const std::vector<double>& per_rank);

  // Every rank's `mine` ([rank][figure]; each rank as many figures), in one all-reduce; a NaN
  // stays in its own place.
  std::vector<std::vector<double>> gather(const std::vector<double>& mine);

  int64_t ranks() const { return world_->size(); }

 private:
  std::shared_ptr<parallel::Comm> world_;
  torch::Device device_;
};

}  // namespace xtrain::train

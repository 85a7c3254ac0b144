// BatchSchedule: which samples each data-parallel rank reads at each optimizer step.
//
// A step reads the G samples that follow the samples consumed so far (its position) in the
// dataset's global order, whatever the number of ranks. Without balancing, rank r takes the
// r-th contiguous slice. With a balance window of n steps (data.balance_window), the n * G
// samples of each window are sorted by attention cost (attention_cost), cut into n groups of G
// neighbours in that order, and the window's steps take the groups in a seeded random order;
// inside a step, the costliest remaining sample goes to the least loaded rank that still has
// room (every rank reads G / ranks samples). A step's samples therefore depend on the window,
// not on the number of ranks, so a run resumed with another data-parallel size reads the same
// global batches; only their split among ranks changes.
//
// Not thread-safe: the costs of the current window are cached.
#pragma once
#include <cstdint>
#include <vector>

#include "data/sample_dataset.h"

namespace xtrain::data {

struct BalanceOptions {
  int64_t window_steps = 0;  // 0: no balancing
  bool pack = false;         // the cost proxy of a sample depends on its document pieces
  uint64_t seed = 0;
};

class BatchSchedule {
 public:
  BatchSchedule(const SampleDataset& dataset, int64_t global_batch, const BalanceOptions& options);

  // The samples of the step that begins at sample `position` (a multiple of the global batch
  // when balancing), [ranks][global_batch / ranks]; ranks divides global_batch.
  std::vector<std::vector<int64_t>> step_samples(int64_t position, int64_t ranks) const;

  int64_t global_batch() const { return global_batch_; }
  const BalanceOptions& options() const { return options_; }

 private:
  // The global batch of step `step` in the order it is dealt (costliest first when balanced).
  std::vector<int64_t> step_batch(int64_t position) const;
  void load_window(int64_t window) const;

  const SampleDataset& dataset_;
  int64_t global_batch_;
  BalanceOptions options_;
  mutable int64_t cached_window_ = -1;
  mutable std::vector<int64_t> window_order_;  // the window's samples, costliest first
  mutable std::vector<double> window_costs_;   // cost of each sample of window_order_
  mutable std::vector<int64_t> group_of_step_;
};

// How evenly a schedule spreads attention cost: per step, the costliest rank's cost over the
// mean rank cost, averaged (mean) and at its worst (max) over `steps` steps from the start.
struct BalanceStats {
  double mean_ratio = 0;
  double max_ratio = 0;
};
BalanceStats measure_balance(const SampleDataset& dataset, const BatchSchedule& schedule, int64_t ranks,
                             int64_t steps);

}  // namespace xtrain::data

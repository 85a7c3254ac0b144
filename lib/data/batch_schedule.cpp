#include "data/batch_schedule.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "data/micro_batch.h"
#include "data/permutation.h"

namespace xtrain::data {

BatchSchedule::BatchSchedule(const SampleDataset& dataset, int64_t global_batch, const BalanceOptions& options)
    : dataset_(dataset), global_batch_(global_batch), options_(options) {
  if (global_batch <= 0) throw std::invalid_argument("the global batch must be positive");
  if (options.window_steps < 0) throw std::invalid_argument("the balance window must not be negative");
}

void BatchSchedule::load_window(int64_t window) const {
  if (window == cached_window_) return;
  const int64_t size = options_.window_steps * global_batch_;
  const int64_t first = window * size;
  std::vector<double> cost(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) cost[static_cast<size_t>(i)] = attention_cost(dataset_, first + i, options_.pack);
  std::vector<int64_t> order(static_cast<size_t>(size));
  std::iota(order.begin(), order.end(), 0);
  // Ties keep the sample order, so the schedule is the same on every platform.
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return cost[static_cast<size_t>(a)] > cost[static_cast<size_t>(b)]; });
  window_order_.resize(order.size());
  window_costs_.resize(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    window_order_[i] = first + order[i];
    window_costs_[i] = cost[static_cast<size_t>(order[i])];
  }
  // Groups of neighbouring costs would otherwise come costliest first; the order of steps is
  // random instead, seeded per window (stream 2^32 + window keeps it apart from epoch streams).
  group_of_step_ = random_permutation(options_.window_steps, options_.seed, (uint64_t{1} << 32) + window);
  cached_window_ = window;
}

std::vector<int64_t> BatchSchedule::step_batch(int64_t position) const {
  std::vector<int64_t> batch(static_cast<size_t>(global_batch_));
  if (options_.window_steps == 0) {
    std::iota(batch.begin(), batch.end(), position);
    return batch;
  }
  if (position % global_batch_ != 0)
    throw std::invalid_argument("a balanced schedule starts its steps at multiples of the global batch");
  const int64_t step = position / global_batch_;
  load_window(step / options_.window_steps);
  const int64_t group = group_of_step_[static_cast<size_t>(step % options_.window_steps)];
  std::copy_n(window_order_.begin() + group * global_batch_, global_batch_, batch.begin());
  return batch;
}

std::vector<std::vector<int64_t>> BatchSchedule::step_samples(int64_t position, int64_t ranks) const {
  if (ranks <= 0 || global_batch_ % ranks != 0)
    throw std::invalid_argument("the data-parallel ranks must divide the global batch");
  const int64_t per_rank = global_batch_ / ranks;
  const std::vector<int64_t> batch = step_batch(position);
  const int64_t step = position / global_batch_;
  std::vector<std::vector<int64_t>> samples(static_cast<size_t>(ranks));
  if (options_.window_steps == 0) {
    for (int64_t r = 0; r < ranks; ++r)
      samples[static_cast<size_t>(r)].assign(batch.begin() + r * per_rank, batch.begin() + (r + 1) * per_rank);
    return samples;
  }
  // Longest processing time first, with equal counts: the batch is already costliest first.
  // step_batch loaded this step's window: the batch is window_order_[group_first, + G).
  const int64_t group_first = group_of_step_[static_cast<size_t>(step % options_.window_steps)] * global_batch_;
  std::vector<double> load(static_cast<size_t>(ranks), 0.0);
  for (int64_t i = 0; i < global_batch_; ++i) {
    int64_t best = -1;
    for (int64_t r = 0; r < ranks; ++r) {
      if (static_cast<int64_t>(samples[static_cast<size_t>(r)].size()) == per_rank) continue;
      if (best < 0 || load[static_cast<size_t>(r)] < load[static_cast<size_t>(best)]) best = r;
    }
    samples[static_cast<size_t>(best)].push_back(batch[static_cast<size_t>(i)]);
    load[static_cast<size_t>(best)] += window_costs_[static_cast<size_t>(group_first + i)];
  }
  return samples;
}

BalanceStats measure_balance(const SampleDataset& dataset, const BatchSchedule& schedule, int64_t ranks,
                             int64_t steps) {
  BalanceStats stats;
  for (int64_t step = 0; step < steps; ++step) {
    double max_cost = 0, total = 0;
    for (const auto& rank_samples : schedule.step_samples(step * schedule.global_batch(), ranks)) {
      double cost = 0;
      for (int64_t g : rank_samples) cost += attention_cost(dataset, g, schedule.options().pack);
      max_cost = std::max(max_cost, cost);
      total += cost;
    }
    const double ratio = total > 0 ? max_cost * static_cast<double>(ranks) / total : 1.0;
    stats.mean_ratio += ratio / static_cast<double>(steps);
    stats.max_ratio = std::max(stats.max_ratio, ratio);
  }
  return stats;
}

}  // namespace xtrain::data

#include "data/blended_dataset.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "util/input_error.h"

namespace xtrain::data {

BlendedDataset::BlendedDataset(std::vector<std::unique_ptr<TokenDataset>> datasets, std::vector<double> weights)
    : datasets_(std::move(datasets)), weights_(std::move(weights)) {
  if (datasets_.empty() || datasets_.size() != weights_.size())
    throw std::invalid_argument("a blend needs one weight per dataset, and at least one dataset");
  double total = 0;
  for (double weight : weights_) {
    if (!(weight > 0) || !std::isfinite(weight))
      throw InputError(fmt::format("blend weight {} must be a positive number", weight));
    total += weight;
  }
  for (auto& weight : weights_) weight /= total;
  for (const auto& dataset : datasets_)
    if (dataset->seq_len() != datasets_.front()->seq_len())
      throw std::invalid_argument("blended datasets must have the same seq_len");

  // Megatron's greedy: at position i (counted from 1 at the start), the dataset whose share
  // weight * i exceeds its samples so far by the most takes the sample; ties go to the first.
  const size_t n = datasets_.size();
  cycle_dataset_.resize(kCycle);
  cycle_rank_.resize(kCycle);
  per_cycle_.assign(n, 0);
  for (int64_t i = 0; i < kCycle; ++i) {
    const double position = std::max(static_cast<double>(i), 1.0);
    size_t best = 0;
    double best_error = weights_[0] * position - static_cast<double>(per_cycle_[0]);
    for (size_t d = 1; d < n; ++d) {
      const double error = weights_[d] * position - static_cast<double>(per_cycle_[d]);
      if (error > best_error) {
        best_error = error;
        best = d;
      }
    }
    cycle_dataset_[static_cast<size_t>(i)] = static_cast<uint32_t>(best);
    cycle_rank_[static_cast<size_t>(i)] = per_cycle_[best]++;
  }
  for (size_t d = 0; d < n; ++d)
    if (per_cycle_[d] == 0)
      throw InputError(fmt::format("blend source {} has weight {:.3g} of the total, too little to be sampled "
                                   "(at least 1/{} is needed); raise its weight or remove it",
                                   d + 1, weights_[d], kCycle));
}

std::pair<size_t, int64_t> BlendedDataset::locate(int64_t global_index) const {
  TORCH_CHECK(global_index >= 0, "sample index must be non-negative, got ", global_index);
  const int64_t cycle = global_index / kCycle;
  const auto position = static_cast<size_t>(global_index % kCycle);
  const size_t dataset = cycle_dataset_[position];
  return {dataset, cycle * per_cycle_[dataset] + cycle_rank_[position]};
}

int64_t BlendedDataset::num_samples() const {
  int64_t total = 0;
  for (const auto& dataset : datasets_) total += dataset->num_samples();
  return total;
}

int64_t BlendedDataset::num_tokens() const {
  int64_t total = 0;
  for (const auto& dataset : datasets_) total += dataset->num_tokens();
  return total;
}

bool BlendedDataset::has_loss_mask() const {
  return std::any_of(datasets_.begin(), datasets_.end(), [](const auto& d) { return d->has_loss_mask(); });
}

torch::Tensor BlendedDataset::batch(int64_t first_global_index, int64_t count) const {
  TORCH_CHECK(count >= 0, "batch size must be non-negative, got ", count);
  const int64_t window = seq_len() + 1;
  torch::Tensor out = torch::empty({count, window}, torch::kInt64);
  int64_t* rows = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    const auto [dataset, index] = locate(first_global_index + i);
    datasets_[dataset]->read_sample(index, rows + i * window, nullptr);
  }
  return out;
}

torch::Tensor BlendedDataset::targets(int64_t first_global_index, int64_t count) const {
  TORCH_CHECK(count >= 0, "batch size must be non-negative, got ", count);
  torch::Tensor out = torch::empty({count, seq_len()}, torch::kInt64);
  std::vector<int64_t> tokens(static_cast<size_t>(seq_len() + 1));
  int64_t* rows = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    const auto [dataset, index] = locate(first_global_index + i);
    datasets_[dataset]->read_sample(index, tokens.data(), rows + i * seq_len());
  }
  return out;
}

std::vector<int64_t> BlendedDataset::document_starts(int64_t global_index) const {
  const auto [dataset, index] = locate(global_index);
  return datasets_[dataset]->document_starts(index);
}

double BlendedDataset::unigram_entropy() const {
  std::vector<double> mixture;
  for (size_t d = 0; d < datasets_.size(); ++d) {
    const std::vector<double> distribution = datasets_[d]->unigram_distribution();
    if (distribution.size() > mixture.size()) mixture.resize(distribution.size(), 0.0);
    for (size_t t = 0; t < distribution.size(); ++t) mixture[t] += weights_[d] * distribution[t];
  }
  return entropy_of(mixture);
}

}  // namespace xtrain::data

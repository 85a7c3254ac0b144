// BlendedDataset: samples drawn from several datasets in proportion to weights. The
// interleaving is Megatron-LM's (build_blending_indices in megatron/core/datasets/helpers.cpp):
// each sample goes to the dataset furthest below its share so far, which needs no random numbers
// and keeps every prefix of the order close to the weights. It is computed once for a cycle of
// kCycle samples and repeated, so sample g is the (g / kCycle * share + rank in the cycle)-th
// sample of its dataset: a pure function of g, at any g, without an index as long as the run.
// Each dataset runs through its own epochs and permutation.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "data/sample_dataset.h"
#include "data/token_dataset.h"

namespace xtrain::data {

class BlendedDataset final : public SampleDataset {
 public:
  static constexpr int64_t kCycle = 1 << 16;

  // weights: positive, any scale (normalised here); a dataset whose weight is too small to get a
  // sample in a cycle is an InputError. Every dataset has the same seq_len.
  BlendedDataset(std::vector<std::unique_ptr<TokenDataset>> datasets, std::vector<double> weights);

  // Samples of one epoch: those of all datasets.
  int64_t num_samples() const override;
  int64_t num_tokens() const override;
  int64_t seq_len() const override { return datasets_.front()->seq_len(); }
  torch::Tensor batch(int64_t first_global_index, int64_t count) const override;
  torch::Tensor targets(int64_t first_global_index, int64_t count) const override;
  bool has_loss_mask() const override;
  std::vector<int64_t> document_starts(int64_t global_index) const override;
  // Of the mixture of the datasets' unigram distributions, weighted by the blend.
  double unigram_entropy() const override;

  // Which dataset sample g comes from, and its index there.
  std::pair<size_t, int64_t> locate(int64_t global_index) const;
  const std::vector<double>& weights() const { return weights_; }

 private:
  std::vector<std::unique_ptr<TokenDataset>> datasets_;
  std::vector<double> weights_;           // normalised
  std::vector<uint32_t> cycle_dataset_;   // [kCycle]: the dataset of each position
  std::vector<int64_t> cycle_rank_;       // [kCycle]: its samples from that dataset before it
  std::vector<int64_t> per_cycle_;        // samples of each dataset in a cycle
};

}  // namespace xtrain::data

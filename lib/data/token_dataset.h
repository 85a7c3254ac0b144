// TokenDataset: one token stream cut into fixed-length training samples: non-overlapping
// windows of seq_len + 1 tokens (inputs = [:-1], targets = [1:]); the tail shorter than a
// window is never read. Sample order: the global sample index g runs over epochs; epoch
// e = g / num_samples uses a permutation seeded by (seed, e), so the order is a pure function
// of (seed, g).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/epoch_order.h"
#include "data/sample_dataset.h"
#include "data/token_stream.h"
#include "text/tokenizer.h"

namespace xtrain::data {

class TokenDataset final : public SampleDataset {
 public:
  TokenDataset(std::shared_ptr<const TokenStream> stream, int64_t seq_len, uint64_t seed, bool shuffle);
  // Plain text documents, joined with the tokenizer's EOS id.
  TokenDataset(const std::vector<std::string>& documents, const text::Tokenizer& tokenizer, int64_t seq_len,
               uint64_t seed, bool shuffle);

  int64_t num_samples() const override { return num_samples_; }
  int64_t num_tokens() const override { return stream_->size(); }
  int64_t seq_len() const override { return seq_len_; }
  torch::Tensor batch(int64_t first_global_index, int64_t count) const override;
  torch::Tensor targets(int64_t first_global_index, int64_t count) const override;
  bool has_loss_mask() const override { return stream_->has_loss_mask(); }
  std::vector<int64_t> document_starts(int64_t global_index) const override;
  double unigram_entropy() const override;

  // Writes sample g's seq_len + 1 tokens, and, when targets is not null, its seq_len targets.
  void read_sample(int64_t global_index, int64_t* tokens, int64_t* targets) const;
  // Frequencies of the target tokens (index: token id). Exact up to 64M tokens; above, from
  // 64 evenly spaced blocks of 1M tokens, so that opening a huge dataset stays fast.
  std::vector<double> unigram_distribution() const;

 private:
  std::shared_ptr<const TokenStream> stream_;
  int64_t seq_len_;
  int64_t num_samples_;
  EpochOrder order_;
};

// Entropy (nats) of a distribution given as frequencies that sum to 1.
double entropy_of(const std::vector<double>& distribution);

}  // namespace xtrain::data

// TokenDataset: a token stream cut into fixed-length training samples.
// Documents are tokenized and joined with the tokenizer's EOS id into one stream, which is
// cut into non-overlapping windows of seq_len + 1 tokens (inputs = [:-1], targets = [1:]).
// Sample order: the global sample index g runs over epochs; epoch e = g / num_samples uses a
// permutation seeded by (seed, e), so the order is a pure function of (seed, g): it does not
// depend on the number of ranks or on where a run was resumed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include <torch/types.h>

#include "data/tokenizer.h"

namespace xtrain::data {

class TokenDataset {
 public:
  TokenDataset(const std::vector<std::string>& documents, const Tokenizer& tokenizer,
               int64_t seq_len, uint64_t seed, bool shuffle);

  int64_t num_samples() const;
  int64_t num_tokens() const;
  int64_t seq_len() const;

  // Sample at global index g (any g >= 0): int64 tensor [seq_len + 1].
  torch::Tensor sample(int64_t global_index) const;
  // Samples first .. first + count - 1: int64 tensor [count, seq_len + 1].
  torch::Tensor batch(int64_t first_global_index, int64_t count) const;

  // Entropy (nats) of the unigram distribution of the token stream: the loss of a model
  // that knows only token frequencies, the bar a trained model must clear.
  double unigram_entropy() const;

 private:
  int64_t index_in_epoch(int64_t global_index) const;

  std::vector<int64_t> tokens_;
  int64_t seq_len_;
  uint64_t seed_;
  bool shuffle_;
  int64_t num_samples_;
  mutable int64_t cached_epoch_ = -1;
  mutable std::vector<int64_t> cached_permutation_;
};

}  // namespace xtrain::data

#include "data/token_dataset.h"

#include <cmath>
#include <cstring>

#include "data/permutation.h"
#include "util/input_error.h"

namespace xtrain::data {

TokenDataset::TokenDataset(const std::vector<std::string>& documents, const Tokenizer& tokenizer,
                           int64_t seq_len, uint64_t seed, bool shuffle)
    : seq_len_(seq_len), seed_(seed), shuffle_(shuffle) {
  if (seq_len <= 0) throw InputError("seq_len must be positive, got " + std::to_string(seq_len));
  // A byte tokenizer yields about one token per byte; reserving avoids regrowing a
  // multi-megabyte vector while appending.
  size_t total_bytes = 0;
  for (const auto& document : documents) total_bytes += document.size() + 1;
  tokens_.reserve(total_bytes);
  const int64_t eos = tokenizer.eos_id();
  for (const auto& document : documents) {
    const std::vector<int64_t> ids = tokenizer.encode(document);
    tokens_.insert(tokens_.end(), ids.begin(), ids.end());
    tokens_.push_back(eos);
  }

  const int64_t window = seq_len + 1;
  const auto num_tokens = static_cast<int64_t>(tokens_.size());
  if (num_tokens < window) {
    throw InputError("the data has " + std::to_string(num_tokens) + " tokens, but seq_len " +
                     std::to_string(seq_len) + " needs at least " + std::to_string(window) +
                     " for one sample; add data or lower seq_len");
  }
  num_samples_ = num_tokens / window;  // the tail shorter than a window is never read
}

int64_t TokenDataset::num_samples() const { return num_samples_; }
int64_t TokenDataset::num_tokens() const { return static_cast<int64_t>(tokens_.size()); }
int64_t TokenDataset::seq_len() const { return seq_len_; }

// Not thread-safe: the permutation of the current epoch is cached, and computing it is the
// only non-trivial work, done once per epoch.
int64_t TokenDataset::index_in_epoch(int64_t global_index) const {
  TORCH_CHECK(global_index >= 0, "sample index must be non-negative, got ", global_index);
  const int64_t epoch = global_index / num_samples_;
  const int64_t position = global_index % num_samples_;
  if (!shuffle_) return position;
  if (epoch != cached_epoch_) {
    cached_permutation_ = random_permutation(num_samples_, seed_, static_cast<uint64_t>(epoch));
    cached_epoch_ = epoch;
  }
  return cached_permutation_[static_cast<size_t>(position)];
}

torch::Tensor TokenDataset::sample(int64_t global_index) const {
  return batch(global_index, 1).squeeze(0);
}

torch::Tensor TokenDataset::batch(int64_t first_global_index, int64_t count) const {
  TORCH_CHECK(count >= 0, "batch size must be non-negative, got ", count);
  const int64_t window = seq_len_ + 1;
  torch::Tensor out = torch::empty({count, window}, torch::kInt64);
  int64_t* rows = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t start = index_in_epoch(first_global_index + i) * window;
    std::memcpy(rows + i * window, tokens_.data() + start, sizeof(int64_t) * window);
  }
  return out;
}

double TokenDataset::unigram_entropy() const {
  std::vector<int64_t> counts;
  for (int64_t token : tokens_) {
    if (static_cast<size_t>(token) >= counts.size()) counts.resize(token + 1, 0);
    ++counts[static_cast<size_t>(token)];
  }
  const double total = static_cast<double>(tokens_.size());
  double entropy = 0.0;
  for (int64_t count : counts) {
    if (count == 0) continue;
    const double p = static_cast<double>(count) / total;
    entropy -= p * std::log(p);
  }
  return entropy;
}

}  // namespace xtrain::data

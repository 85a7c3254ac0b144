#include "data/token_dataset.h"

#include <cmath>

#include "util/input_error.h"

namespace xtrain::data {
namespace {

std::shared_ptr<const TokenStream> encode_texts(const std::vector<std::string>& documents,
                                                const text::Tokenizer& tokenizer) {
  auto stream = std::make_shared<InMemoryTokenStream>();
  // A byte tokenizer yields about one token per byte; reserving avoids regrowing a
  // multi-megabyte vector while appending.
  size_t total_bytes = 0;
  for (const auto& document : documents) total_bytes += document.size() + 1;
  stream->reserve(total_bytes);
  EncodedDocument encoded;
  for (const auto& document : documents) {
    encoded.tokens = tokenizer.encode(document);
    encoded.tokens.push_back(tokenizer.eos_id());
    stream->append(encoded);
  }
  return stream;
}

constexpr int64_t kExactEntropyTokens = int64_t{64} << 20;
constexpr int64_t kEntropyBlock = int64_t{1} << 20;

}  // namespace

TokenDataset::TokenDataset(std::shared_ptr<const TokenStream> stream, int64_t seq_len, uint64_t seed, bool shuffle)
    : stream_(std::move(stream)), seq_len_(seq_len), order_(seed, shuffle) {
  if (seq_len <= 0) throw InputError("seq_len must be positive, got " + std::to_string(seq_len));
  const int64_t window = seq_len + 1;
  const int64_t num_tokens = stream_->size();
  if (num_tokens < window) {
    throw InputError("the data has " + std::to_string(num_tokens) + " tokens, but seq_len " +
                     std::to_string(seq_len) + " needs at least " + std::to_string(window) +
                     " for one sample; add data or lower seq_len");
  }
  num_samples_ = num_tokens / window;
}

TokenDataset::TokenDataset(const std::vector<std::string>& documents, const text::Tokenizer& tokenizer, int64_t seq_len,
                           uint64_t seed, bool shuffle)
    : TokenDataset(encode_texts(documents, tokenizer), seq_len, seed, shuffle) {}

void TokenDataset::read_sample(int64_t global_index, int64_t* tokens, int64_t* targets) const {
  const int64_t window = seq_len_ + 1;
  const int64_t start = order_.sample(global_index, num_samples_) * window;
  stream_->read(start, window, tokens);
  if (!targets) return;
  std::copy(tokens + 1, tokens + window, targets);
  if (!stream_->has_loss_mask()) return;
  std::vector<uint8_t> mask(static_cast<size_t>(seq_len_));
  stream_->read_loss_mask(start + 1, seq_len_, mask.data());
  for (int64_t t = 0; t < seq_len_; ++t)
    if (!mask[static_cast<size_t>(t)]) targets[t] = kIgnoreIndex;
}

std::vector<int64_t> TokenDataset::document_starts(int64_t global_index) const {
  const int64_t start = order_.sample(global_index, num_samples_) * (seq_len_ + 1);
  std::vector<int64_t> starts;
  stream_->document_starts(start, seq_len_, starts);
  for (auto& offset : starts) offset -= start;
  return starts;
}

torch::Tensor TokenDataset::batch(int64_t first_global_index, int64_t count) const {
  TORCH_CHECK(count >= 0, "batch size must be non-negative, got ", count);
  torch::Tensor out = torch::empty({count, seq_len_ + 1}, torch::kInt64);
  int64_t* rows = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < count; ++i) read_sample(first_global_index + i, rows + i * (seq_len_ + 1), nullptr);
  return out;
}

torch::Tensor TokenDataset::targets(int64_t first_global_index, int64_t count) const {
  TORCH_CHECK(count >= 0, "batch size must be non-negative, got ", count);
  torch::Tensor out = torch::empty({count, seq_len_}, torch::kInt64);
  std::vector<int64_t> tokens(static_cast<size_t>(seq_len_ + 1));
  int64_t* rows = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < count; ++i) read_sample(first_global_index + i, tokens.data(), rows + i * seq_len_);
  return out;
}

std::vector<double> TokenDataset::unigram_distribution() const {
  const int64_t size = stream_->size();
  const bool sampled = size > kExactEntropyTokens;
  const int64_t blocks = sampled ? kExactEntropyTokens / kEntropyBlock : (size + kEntropyBlock - 1) / kEntropyBlock;
  std::vector<int64_t> counts;
  std::vector<int64_t> ids;
  std::vector<uint8_t> mask;
  int64_t total = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = sampled ? b * ((size - kEntropyBlock) / (blocks - 1)) : b * kEntropyBlock;
    const int64_t count = std::min(kEntropyBlock, size - begin);
    ids.resize(static_cast<size_t>(count));
    stream_->read(begin, count, ids.data());
    if (stream_->has_loss_mask()) {
      mask.resize(static_cast<size_t>(count));
      stream_->read_loss_mask(begin, count, mask.data());
    }
    for (int64_t i = 0; i < count; ++i) {
      if (!mask.empty() && !mask[static_cast<size_t>(i)]) continue;
      const auto token = static_cast<size_t>(ids[static_cast<size_t>(i)]);
      if (token >= counts.size()) counts.resize(token + 1, 0);
      ++counts[token];
      ++total;
    }
  }
  std::vector<double> distribution(counts.size());
  for (size_t i = 0; i < counts.size(); ++i)
    distribution[i] = total ? static_cast<double>(counts[i]) / static_cast<double>(total) : 0.0;
  return distribution;
}

double TokenDataset::unigram_entropy() const { return entropy_of(unigram_distribution()); }

double entropy_of(const std::vector<double>& distribution) {
  double entropy = 0.0;
  for (double p : distribution)
    if (p > 0) entropy -= p * std::log(p);
  return entropy;
}

}  // namespace xtrain::data

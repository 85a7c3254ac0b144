#include "data/masked_lm_dataset.h"

#include <algorithm>

#include <torch/torch.h>

namespace xtrain::data {
namespace {

// A generator of (seed, g) alone: SplitMix64 (Steele et al. 2014), whose output sequence is
// fixed by its definition, not by a standard library.
class SampleRandom {
 public:
  SampleRandom(uint64_t seed, int64_t g) : state_(seed) { state_ = next() ^ static_cast<uint64_t>(g); }
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  int64_t below(int64_t n) {
    return static_cast<int64_t>((static_cast<unsigned __int128>(next()) * static_cast<uint64_t>(n)) >> 64);
  }

 private:
  uint64_t state_;
};

}  // namespace

MaskedLmDataset::MaskedLmDataset(std::unique_ptr<SampleDataset> base, MaskedLmOptions options)
    : base_(std::move(base)), options_(std::move(options)) {
  std::sort(options_.special_ids.begin(), options_.special_ids.end());
}

MaskedLmDataset::Masked MaskedLmDataset::masked(int64_t g) const {
  const int64_t seq = seq_len();
  const auto window = base_->sample(g).contiguous();
  const auto* tokens = window.data_ptr<int64_t>();
  Masked out{std::vector<int64_t>(static_cast<size_t>(seq)), std::vector<int64_t>(static_cast<size_t>(seq), kIgnoreIndex)};
  out.inputs[0] = options_.cls_id;
  std::copy(tokens, tokens + seq - 1, out.inputs.begin() + 1);
  SampleRandom random(options_.seed, g);
  for (int64_t i = 1; i < seq; ++i) {
    const int64_t token = out.inputs[static_cast<size_t>(i)];
    // One draw per position whatever the token, so a position's choice never depends on others.
    const double choose = random.uniform(), how = random.uniform();
    const int64_t replacement = random.below(options_.vocab_size);
    if (std::binary_search(options_.special_ids.begin(), options_.special_ids.end(), token)) continue;
    if (choose >= options_.probability) continue;
    out.targets[static_cast<size_t>(i)] = token;
    if (how < 0.8)
      out.inputs[static_cast<size_t>(i)] = options_.mask_id;
    else if (how < 0.9)
      out.inputs[static_cast<size_t>(i)] = replacement;
  }
  return out;
}

torch::Tensor MaskedLmDataset::batch(int64_t first, int64_t count) const {
  const int64_t seq = seq_len();
  auto out = torch::full({count, seq + 1}, options_.cls_id, torch::kInt64);
  for (int64_t row = 0; row < count; ++row) {
    const auto sample = masked(first + row);
    std::copy(sample.inputs.begin(), sample.inputs.end(), out[row].data_ptr<int64_t>());
  }
  return out;
}

torch::Tensor MaskedLmDataset::targets(int64_t first, int64_t count) const {
  const int64_t seq = seq_len();
  auto out = torch::empty({count, seq}, torch::kInt64);
  for (int64_t row = 0; row < count; ++row) {
    const auto sample = masked(first + row);
    std::copy(sample.targets.begin(), sample.targets.end(), out[row].data_ptr<int64_t>());
  }
  return out;
}

// The underlying window's token j is this sample's token j + 1: a document beginning at j
// begins here at j + 1 (its [SEP] before it ends the previous piece).
std::vector<int64_t> MaskedLmDataset::document_starts(int64_t g) const {
  std::vector<int64_t> starts;
  for (int64_t s : base_->document_starts(g))
    if (s + 1 < seq_len()) starts.push_back(s + 1);
  return starts;
}

}  // namespace xtrain::data

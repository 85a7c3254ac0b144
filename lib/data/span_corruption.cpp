#include "data/span_corruption.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <torch/torch.h>

namespace xtrain::data {
namespace {

// numpy's round: halves to even (std::nearbyint in the default rounding mode).
int64_t round_even(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

// _random_segmentation: num_items cut into num_segments non-empty pieces, the cuts a uniform
// choice of num_segments - 1 of the num_items - 1 gaps (np.random.shuffle of the marks).
std::vector<int64_t> random_segmentation(int64_t num_items, int64_t num_segments, std::mt19937_64& rng) {
  std::vector<uint8_t> marks(static_cast<size_t>(std::max<int64_t>(num_items - 1, 0)), 0);
  for (int64_t i = 0; i < num_segments - 1 && i < num_items - 1; ++i) marks[static_cast<size_t>(i)] = 1;
  for (size_t i = marks.size(); i > 1; --i) {
    std::uniform_int_distribution<size_t> pick(0, i - 1);
    std::swap(marks[i - 1], marks[pick(rng)]);
  }
  std::vector<int64_t> lengths{1};
  for (uint8_t first : marks) {
    if (first) lengths.push_back(0);
    ++lengths.back();
  }
  return lengths;
}

// The tokens kept by `keep` (0 at the positions that vanish, a sentinel id at each run's first
// position of the other side), then EOS: filter_input_ids of create_sentinel_ids.
std::vector<int64_t> filter(const std::vector<int64_t>& tokens, const std::vector<uint8_t>& noise, bool replace_noise,
                            int64_t vocab_size, int64_t eos_id) {
  std::vector<int64_t> out;
  int64_t sentinel = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const bool replaced = (noise[i] != 0) == replace_noise;
    if (!replaced) {
      out.push_back(tokens[i]);
      continue;
    }
    const bool starts = i == 0 || ((noise[i - 1] != 0) != (noise[i] != 0));
    if (starts) out.push_back(vocab_size - 1 - sentinel++);
  }
  out.push_back(eos_id);
  return out;
}

}  // namespace

SpanCorruptionLengths span_corruption_lengths(int64_t input_length, double noise_density,
                                              double mean_noise_span_length) {
  // The encoder's and the decoder's lengths of a window of `tokens` tokens: the kept tokens and a
  // sentinel a span, or the noise tokens and a sentinel a span, and EOS.
  struct Sides {
    int64_t inputs, targets;
  };
  auto sides = [&](int64_t tokens) {
    const int64_t noise = round_even(static_cast<double>(tokens) * noise_density);
    const int64_t spans = round_even(static_cast<double>(noise) / mean_noise_span_length);
    return Sides{tokens - noise + spans + 1, noise + spans + 1};
  };
  int64_t tokens = input_length;
  while (sides(tokens + 1).inputs <= input_length) ++tokens;
  int64_t targets = sides(tokens).targets;
  // T5's own adjustment, that makes 50% noise give targets as long as the inputs.
  if (noise_density == 0.5 && targets > sides(tokens).inputs) --tokens, --targets;
  // The spans of a mask of `tokens` tokens, as random_spans_noise_mask counts them.
  const int64_t noise = std::min(std::max<int64_t>(round_even(static_cast<double>(tokens) * noise_density), 1), tokens - 1);
  const int64_t spans = std::max<int64_t>(
      round_even(static_cast<double>(std::min(noise, tokens - noise)) / mean_noise_span_length), 1);
  return {tokens, targets, spans};
}

std::vector<uint8_t> random_spans_noise_mask(int64_t length, double noise_density, double mean_noise_span_length,
                                             std::mt19937_64& rng) {
  int64_t noise = round_even(static_cast<double>(length) * noise_density);
  noise = std::min(std::max<int64_t>(noise, 1), length - 1);
  const int64_t kept = length - noise;
  const int64_t spans =
      std::max<int64_t>(round_even(static_cast<double>(std::min(noise, kept)) / mean_noise_span_length), 1);
  const auto noise_lengths = random_segmentation(noise, spans, rng);
  const auto kept_lengths = random_segmentation(kept, spans, rng);
  std::vector<uint8_t> mask;
  mask.reserve(static_cast<size_t>(length));
  for (size_t s = 0; s < noise_lengths.size(); ++s) {
    mask.insert(mask.end(), static_cast<size_t>(kept_lengths[s]), 0);
    mask.insert(mask.end(), static_cast<size_t>(noise_lengths[s]), 1);
  }
  return mask;
}

Corrupted corrupt_spans(const std::vector<int64_t>& tokens, const std::vector<uint8_t>& noise, int64_t vocab_size,
                        int64_t eos_id) {
  return {filter(tokens, noise, true, vocab_size, eos_id), filter(tokens, noise, false, vocab_size, eos_id)};
}

SpanCorruptionDataset::SpanCorruptionDataset(std::unique_ptr<SampleDataset> base, SpanCorruptionOptions options)
    : base_(std::move(base)),
      options_(options),
      lengths_(span_corruption_lengths(options.input_length, options.noise_density, options.mean_noise_span_length)) {
  if (base_->seq_len() + 1 != lengths_.expanded)
    throw std::logic_error(fmt::format("span corruption of {} encoder tokens reads windows of {} tokens, not {}",
                                       options_.input_length, lengths_.expanded, base_->seq_len() + 1));
}

std::vector<uint8_t> SpanCorruptionDataset::noise_mask(int64_t global_index) const {
  std::seed_seq seeds{static_cast<uint32_t>(options_.seed), static_cast<uint32_t>(options_.seed >> 32),
                      static_cast<uint32_t>(global_index), static_cast<uint32_t>(global_index >> 32), 0x75u};
  std::mt19937_64 rng(seeds);
  return random_spans_noise_mask(lengths_.expanded, options_.noise_density, options_.mean_noise_span_length, rng);
}

Corrupted SpanCorruptionDataset::corrupted(int64_t global_index) const {
  const auto window = base_->sample(global_index).contiguous();
  const std::vector<int64_t> tokens(window.data_ptr<int64_t>(), window.data_ptr<int64_t>() + window.numel());
  auto result = corrupt_spans(tokens, noise_mask(global_index), options_.vocab_size, options_.eos_id);
  if (static_cast<int64_t>(result.inputs.size()) != options_.input_length ||
      static_cast<int64_t>(result.targets.size()) != lengths_.targets)
    throw std::logic_error(fmt::format("span corruption gave {} inputs and {} targets, not {} and {}",
                                       result.inputs.size(), result.targets.size(), options_.input_length,
                                       lengths_.targets));
  return result;
}

torch::Tensor SpanCorruptionDataset::batch(int64_t first, int64_t count) const {
  const int64_t enc = options_.input_length, dec = lengths_.targets;
  auto out = torch::full({count, enc + dec + 1}, options_.pad_id, torch::kInt64);
  for (int64_t row = 0; row < count; ++row) {
    const auto sample = corrupted(first + row);
    auto* p = out[row].data_ptr<int64_t>();
    std::copy(sample.inputs.begin(), sample.inputs.end(), p);
    // The decoder's input: the targets shifted right behind the start id (pad_id).
    std::copy(sample.targets.begin(), sample.targets.end() - 1, p + enc + 1);
  }
  return out;
}

torch::Tensor SpanCorruptionDataset::targets(int64_t first, int64_t count) const {
  const int64_t enc = options_.input_length, dec = lengths_.targets;
  auto out = torch::full({count, enc + dec}, kIgnoreIndex, torch::kInt64);
  for (int64_t row = 0; row < count; ++row) {
    const auto sample = corrupted(first + row);
    std::copy(sample.targets.begin(), sample.targets.end(), out[row].data_ptr<int64_t>() + enc);
  }
  return out;
}

}  // namespace xtrain::data

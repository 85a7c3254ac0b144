// SpanCorruptionDataset: T5's denoising objective (data.objective span_corruption) over any
// sample dataset, as the T5 codebase and transformers' DataCollatorForT5MLM compute it. Sample g
// takes the underlying window g of expanded_length tokens and a noise mask of random spans
// (random_spans_noise_mask: round(length x noise_density) noise tokens in
// round(noise / mean_noise_span_length) spans, the span lengths and the gaps between them drawn
// as random segmentations); each noise span becomes one sentinel id in the encoder's input
// (vocab_size - 1 for the first span, vocab_size - 2 for the next, ...: T5's <extra_id_0>,
// <extra_id_1>, ...), and the targets are each sentinel followed by the span it replaced; both
// end with EOS. The expanded length is the longest whose corrupted input is input_length
// tokens (compute_input_and_target_lengths), so every sample is exactly input_length encoder
// tokens and target_length decoder tokens. The mask is a pure function of (seed, g).
//
// A row is [encoder input | decoder input] (the decoder's input is the targets shifted right
// behind pad_id, T5's decoder start), with targets kIgnoreIndex over the encoder's part:
// encoder_length() tells the batch where to split (train/training_loss.h's model_batch).
#pragma once
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "data/sample_dataset.h"

namespace xtrain::data {

struct SpanCorruptionOptions {
  double noise_density = 0.15;
  double mean_noise_span_length = 3.0;
  int64_t input_length = 0;  // encoder tokens a sample (data.seq_len)
  int64_t vocab_size = 0;    // the model's: sentinels count down from vocab_size - 1
  int64_t eos_id = 1;
  int64_t pad_id = 0;
  uint64_t seed = 0;
};

// The token count a sample is cut from (T5's tokens_length) and the targets' length for an
// encoder input of input_length, as compute_input_and_target_lengths.
struct SpanCorruptionLengths {
  int64_t expanded = 0, targets = 0, noise_spans = 0;
};
SpanCorruptionLengths span_corruption_lengths(int64_t input_length, double noise_density, double mean_noise_span_length);

// random_spans_noise_mask: true at noise, of `length` tokens; the first token is never noise.
std::vector<uint8_t> random_spans_noise_mask(int64_t length, double noise_density, double mean_noise_span_length,
                                             std::mt19937_64& rng);

// One sample's encoder input and targets from its tokens and noise mask (create_sentinel_ids
// and filter_input_ids), each ending with eos_id.
struct Corrupted {
  std::vector<int64_t> inputs, targets;
};
Corrupted corrupt_spans(const std::vector<int64_t>& tokens, const std::vector<uint8_t>& noise, int64_t vocab_size,
                        int64_t eos_id);

class SpanCorruptionDataset final : public SampleDataset {
 public:
  // base: windows of lengths().expanded tokens (its seq_len() + 1).
  SpanCorruptionDataset(std::unique_ptr<SampleDataset> base, SpanCorruptionOptions options);

  int64_t num_samples() const override { return base_->num_samples(); }
  int64_t num_tokens() const override { return base_->num_tokens(); }
  int64_t seq_len() const override { return options_.input_length + lengths_.targets; }
  int64_t encoder_length() const override { return options_.input_length; }
  // [encoder input | decoder input | pad]: [count, seq_len + 1]; inputs are [:, :-1].
  torch::Tensor batch(int64_t first_global_index, int64_t count) const override;
  torch::Tensor targets(int64_t first_global_index, int64_t count) const override;
  bool has_loss_mask() const override { return true; }
  std::vector<int64_t> document_starts(int64_t /*global_index*/) const override { return {}; }
  double unigram_entropy() const override { return base_->unigram_entropy(); }

  const SpanCorruptionLengths& lengths() const { return lengths_; }
  // Sample g's noise mask and its corruption.
  std::vector<uint8_t> noise_mask(int64_t global_index) const;
  Corrupted corrupted(int64_t global_index) const;

 private:
  std::unique_ptr<SampleDataset> base_;
  SpanCorruptionOptions options_;
  SpanCorruptionLengths lengths_;
};

}  // namespace xtrain::data

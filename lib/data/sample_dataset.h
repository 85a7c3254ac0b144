// SampleDataset: what training and evaluation read. Samples are windows of seq_len + 1 tokens
// addressed by a global sample index g >= 0; indices past num_samples() continue into later
// epochs, and the sample at g is a pure function of (seed, g), so it does not depend on the
// number of ranks or on where a run was resumed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

namespace xtrain::data {

// The target of a token that carries no loss (PyTorch's and memory::chunked_cross_entropy's
// default ignore_index).
constexpr int64_t kIgnoreIndex = -100;

class SampleDataset {
 public:
  virtual ~SampleDataset() = default;

  // Samples in one epoch.
  virtual int64_t num_samples() const = 0;
  virtual int64_t num_tokens() const = 0;
  virtual int64_t seq_len() const = 0;

  // Samples first .. first + count - 1: int64 [count, seq_len + 1]; inputs are [:, :-1].
  virtual torch::Tensor batch(int64_t first_global_index, int64_t count) const = 0;
  // Their next-token targets: int64 [count, seq_len], batch[:, 1:] with kIgnoreIndex where a
  // token is not a target (chat data: everything but the assistant's turns).
  virtual torch::Tensor targets(int64_t first_global_index, int64_t count) const = 0;
  // False when every token is a target, so targets() == batch()[:, 1:].
  virtual bool has_loss_mask() const = 0;
  // True when rows 2i and 2i + 1 are a preference pair's chosen and rejected completions
  // (data/preference_dataset.h): a micro batch then counts its pairs as its targets.
  virtual bool preference_pairs() const { return false; }
  // Encoder-decoder samples (data/span_corruption.h): the first encoder_length() tokens of a row
  // are the encoder's input, the rest the decoder's; 0 for every decoder or encoder dataset.
  virtual int64_t encoder_length() const { return 0; }
  // Where documents begin inside sample g: ascending offsets in [1, seq_len] into its
  // seq_len + 1 tokens (offset 0 always begins a piece: a document, or the rest of one cut by
  // the previous window). An offset s splits the inputs at s, and target s - 1 (token s)
  // belongs to the next document.
  virtual std::vector<int64_t> document_starts(int64_t global_index) const = 0;

  // Image chat (vision-language models): sample g's images in the order of their placeholders,
  // preprocessed for the vision tower: float32 [images, channels, height, width], or undefined
  // when the sample has none (every text dataset).
  virtual torch::Tensor pixel_values(int64_t /*global_index*/) const { return {}; }
  // The random transform sample g's pixels took, for a reference to repeat (an image
  // classifier's crop and flip: data/image_class_dataset.h); undefined: none.
  virtual torch::Tensor augmentation(int64_t /*global_index*/) const { return {}; }
  // The vision tower's attention cost proxy for sample g, in the units of micro_batch.h's
  // attention_cost: the sum over its images of their token counts squared.
  virtual double vision_cost(int64_t /*global_index*/) const { return 0; }
  // What else a run's summary should say about the data (images read, records skipped); empty
  // for most datasets.
  virtual std::string notes() const { return {}; }

  // Entropy (nats) of the unigram distribution of the target tokens: the loss of a model that
  // knows only token frequencies, the bar a trained model must clear.
  virtual double unigram_entropy() const = 0;

  // Sample at global index g: int64 [seq_len + 1].
  torch::Tensor sample(int64_t global_index) const { return batch(global_index, 1).squeeze(0); }
};

}  // namespace xtrain::data

// ImageTextDataset: (image, caption) pairs, for contrastive image-text models (model.family
// clip). The source is a JSONL file of records, image paths relative to the file:
//   {"image": "img/0001.png", "caption": "a red circle"}
// Sample g is one record: its tokens are the caption's, closed by end_id and padded with it to
// seq_len (a longer caption is cut to seq_len - 1 tokens and closed), plus one more padding
// token (a sample is seq_len + 1 tokens, as every dataset's); its targets mark the pair once (one
// target a row, so that micro batches weigh by their pairs: train/micro_batch_weight.h), and
// pixel_values(g) is the image as transformers' CLIPImageProcessor gives it
// (image/clip_image_processor.h). Record order is shuffled per epoch, a pure function of
// (seed, g), as for every dataset.
//
// Every image is decoded and every caption tokenized when the dataset is built, so that a missing
// or undecodable file, an empty caption or a malformed record is an InputError naming the file,
// the line and the fix before training starts. Pixels are decoded again when a sample is read.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/epoch_order.h"
#include "data/sample_dataset.h"
#include "image/clip_image_processor.h"
#include "text/tokenizer.h"

namespace xtrain::data {

struct ImageTextOptions {
  int64_t seq_len = 0;  // a caption's tokens, end-of-text and padding included
  int64_t end_id = 0;   // closes each caption and pads it (the text tower pools there)
  image::ClipImageProcessorConfig processor;
  uint64_t seed = 0;
  bool shuffle = true;
};

class ImageTextDataset final : public SampleDataset {
 public:
  ImageTextDataset(const std::string& jsonl_path, const text::Tokenizer& tokenizer, ImageTextOptions options);

  int64_t num_samples() const override { return static_cast<int64_t>(records_.size()); }
  int64_t num_tokens() const override { return num_samples() * options_.seq_len; }
  int64_t seq_len() const override { return options_.seq_len; }
  torch::Tensor batch(int64_t first_global_index, int64_t count) const override;
  // One target a row (0 at the first position, kIgnoreIndex elsewhere): the pair.
  torch::Tensor targets(int64_t first_global_index, int64_t count) const override;
  bool has_loss_mask() const override { return true; }
  std::vector<int64_t> document_starts(int64_t /*global_index*/) const override { return {}; }
  // No unigram bar: the contrastive loss's chance level is ln(global batch), the trainer's.
  double unigram_entropy() const override { return 0; }
  torch::Tensor pixel_values(int64_t global_index) const override;  // float32 [1, 3, size, size]
  std::string notes() const override;

 private:
  struct Record {
    std::string image;            // resolved path
    std::vector<int64_t> tokens;  // seq_len + 1
  };
  const Record& record(int64_t global_index) const;

  ImageTextOptions options_;
  std::vector<Record> records_;
  int64_t truncated_ = 0;
  EpochOrder order_;
};

}  // namespace xtrain::data

// ImageChatDataset: image-chat data for vision-language models (model.family llava). The source
// is a JSONL file of conversation records with "images", paths relative to the file:
//   {"messages": [{"role": "user", "content": "<image>\nWhat is this?"},
//                 {"role": "assistant", "content": "a red circle"}], "images": ["img/1.png"]}
// Sample g is one record: its chat rendering (loss on the assistant's turns), each placeholder
// expanded to the image's feature count (document_encoder.h), then EOS, padded with EOS that
// carries no loss up to seq_len + 1 tokens. Record order is shuffled per epoch, a pure function
// of (seed, g), as for every dataset.
//
// Every image is decoded when the dataset is built, on `workers` threads, so a missing, truncated
// or corrupt file is found before training starts: an InputError naming the record (file:line)
// and the image, or, with skip_bad_images, the record is left out and counted. A record longer
// than seq_len + 1 tokens keeps its head when all its image tokens are inputs (counted as
// truncated), and is an InputError otherwise. Pixel values are decoded again when a sample is
// read (on the batch loader's thread), so memory does not grow with the number of images.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/document_encoder.h"
#include "data/epoch_order.h"
#include "data/sample_dataset.h"
#include "image/clip_image_processor.h"
#include "text/tokenizer.h"

namespace xtrain::data {

struct ImageChatOptions {
  int64_t seq_len = 0;
  uint64_t seed = 0;
  bool shuffle = true;
  std::string chat_template = "chatml";
  ImagePlaceholder placeholder;
  image::ClipImageProcessorConfig processor;
  bool skip_bad_images = false;
  int workers = 1;
};

class ImageChatDataset final : public SampleDataset {
 public:
  ImageChatDataset(const std::string& jsonl_path, const text::Tokenizer& tokenizer, ImageChatOptions options);

  int64_t num_samples() const override { return static_cast<int64_t>(records_.size()); }
  int64_t num_tokens() const override { return num_tokens_; }
  int64_t seq_len() const override { return options_.seq_len; }
  torch::Tensor batch(int64_t first_global_index, int64_t count) const override;
  torch::Tensor targets(int64_t first_global_index, int64_t count) const override;
  bool has_loss_mask() const override { return true; }
  // Where the padding begins, when there is any: the record and its padding are two pieces.
  std::vector<int64_t> document_starts(int64_t global_index) const override;
  double unigram_entropy() const override { return unigram_entropy_; }
  torch::Tensor pixel_values(int64_t global_index) const override;
  double vision_cost(int64_t global_index) const override;
  std::string notes() const override;

  int64_t num_images() const { return num_images_; }
  int64_t skipped_records() const { return skipped_records_; }
  int64_t truncated_records() const { return truncated_records_; }

 private:
  struct Record {
    std::vector<int64_t> tokens;     // at most seq_len + 1, EOS last unless truncated
    std::vector<uint8_t> loss_mask;  // per token: 1 where it is a target
    std::vector<std::string> images;  // resolved paths
  };

  void read_records(const std::string& jsonl_path, const text::Tokenizer& tokenizer);
  void check_images(const std::vector<std::string>& places);
  const Record& record(int64_t global_index) const;
  // Writes sample g's seq_len + 1 tokens and, when targets is not null, its seq_len targets.
  void read_sample(int64_t global_index, int64_t* tokens, int64_t* targets) const;

  ImageChatOptions options_;
  int64_t eos_id_;  // pads every record to seq_len + 1 tokens
  std::vector<Record> records_;
  int64_t num_tokens_ = 0;
  int64_t num_images_ = 0;
  int64_t skipped_records_ = 0;
  int64_t truncated_records_ = 0;
  double unigram_entropy_ = 0;
  EpochOrder order_;
};

}  // namespace xtrain::data

// ImageClassDataset: images with integer labels, for image classifiers (model.family vit). The
// source is a JSONL file of records, image paths relative to the file:
//   {"image": "img/0001.png", "label": 3}
// Sample g is one record: its "tokens" are a placeholder input and the label as the one target
// (seq_len() is 1), and pixel_values(g) is the image as transformers' ViTImageProcessor gives
// it: Pillow's bilinear resize to image_size x image_size, scaled to [0, 1], normalised with
// mean 0.5 and std 0.5 per channel. Record order is shuffled per epoch, a pure function of
// (seed, g), as for every dataset. With an augmentation (training images: data/image_augment.h),
// the image is cropped, resized and mirrored as its draw for (seed, g) says before it is scaled.
//
// Every image is decoded when the dataset is built, so that a missing or undecodable file, a
// label out of [0, num_labels) or a malformed record is an InputError naming the file, the line
// and the fix before training starts. Pixels are decoded again when a sample is read, so memory
// does not grow with the number of images.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/epoch_order.h"
#include "data/image_augment.h"
#include "data/sample_dataset.h"
#include "image/image.h"

namespace xtrain::data {

struct ImageClassOptions {
  int64_t num_labels = 0;
  int64_t image_size = 0;  // square, a side
  uint64_t seed = 0;
  bool shuffle = true;
  ImageAugment augment;  // none by default (evaluation, and training unless the recipe asks)
};

class ImageClassDataset final : public SampleDataset {
 public:
  ImageClassDataset(const std::string& jsonl_path, ImageClassOptions options);

  int64_t num_samples() const override { return static_cast<int64_t>(records_.size()); }
  int64_t num_tokens() const override { return num_samples(); }
  int64_t seq_len() const override { return 1; }
  torch::Tensor batch(int64_t first_global_index, int64_t count) const override;
  torch::Tensor targets(int64_t first_global_index, int64_t count) const override;
  bool has_loss_mask() const override { return false; }
  std::vector<int64_t> document_starts(int64_t /*global_index*/) const override { return {}; }
  // The entropy of the labels' frequencies: the loss of a classifier that ignores the image.
  double unigram_entropy() const override { return label_entropy_; }
  torch::Tensor pixel_values(int64_t global_index) const override;  // float32 [1, 3, size, size]
  // int64 [5]: the crop's top, left, height and width in the decoded image, and 1 if mirrored;
  // undefined without an augmentation.
  torch::Tensor augmentation(int64_t global_index) const override;
  std::string notes() const override;

  // The pixels of one image file as the dataset gives them without augmentation: float32 [3, size, size].
  static torch::Tensor preprocess(const std::string& path, int64_t image_size);
  // An image already at the model's size, scaled and normalised as ViTImageProcessor does.
  static torch::Tensor normalized(const image::Image& image);

 private:
  struct Record {
    std::string image;  // resolved path
    int64_t label = 0;
  };
  const Record& record(int64_t global_index) const;

  ImageClassOptions options_;
  std::vector<Record> records_;
  double label_entropy_ = 0;
  EpochOrder order_;
};

}  // namespace xtrain::data

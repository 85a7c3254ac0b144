#include "data/image_class_dataset.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "image/image_decode.h"
#include "image/image_geometry.h"
#include "image/pil_resize.h"
#include "util/input_error.h"

namespace xtrain::data {
namespace {

std::string image_class_fix() {
  return "each line is {\"image\": \"PATH\", \"label\": N}, PATH relative to the file (docs/models.md, Image "
         "classification)";
}

}  // namespace

ImageClassDataset::ImageClassDataset(const std::string& jsonl_path, ImageClassOptions options)
    : options_(options), order_(options_.seed, options_.shuffle) {
  std::ifstream in(jsonl_path);
  if (!in) throw InputError(fmt::format("{}: cannot read the file", jsonl_path));
  const std::filesystem::path folder = std::filesystem::path(jsonl_path).parent_path();
  std::vector<int64_t> counts(static_cast<size_t>(options_.num_labels), 0);
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", jsonl_path, number);
    const auto json = nlohmann::json::parse(line, nullptr, false);
    if (json.is_discarded() || !json.is_object() || !json.contains("image") || !json.at("image").is_string() ||
        !json.contains("label") || !json.at("label").is_number_integer())
      throw InputError(fmt::format("{}: not an image record; {}", where, image_class_fix()));
    const auto label = json.at("label").get<int64_t>();
    if (label < 0 || label >= options_.num_labels)
      throw InputError(fmt::format("{}: label {} is outside the model's {} labels (0 to {}): correct the record, or "
                                   "start from a model with more labels (config.json's id2label)",
                                   where, label, options_.num_labels, options_.num_labels - 1));
    const auto path = json.at("image").get<std::string>();
    Record record{std::filesystem::path(path).is_absolute() ? path : (folder / path).string(), label};
    try {
      image::decode_image_file(record.image);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: image \"{}\": {} (correct the record; a relative path is read from {})",
                                   where, path, e.what(), folder.empty() ? std::string(".") : folder.string()));
    }
    ++counts[static_cast<size_t>(label)];
    records_.push_back(std::move(record));
  }
  if (records_.empty()) throw InputError(fmt::format("{}: no image records; {}", jsonl_path, image_class_fix()));
  for (int64_t count : counts) {
    if (count == 0) continue;
    const double p = static_cast<double>(count) / static_cast<double>(records_.size());
    label_entropy_ -= p * std::log(p);
  }
}

const ImageClassDataset::Record& ImageClassDataset::record(int64_t global_index) const {
  return records_[static_cast<size_t>(order_.sample(global_index, num_samples()))];
}

torch::Tensor ImageClassDataset::batch(int64_t first_global_index, int64_t count) const {
  auto out = torch::zeros({count, 2}, torch::kInt64);
  for (int64_t i = 0; i < count; ++i) out[i][1] = record(first_global_index + i).label;
  return out;
}

torch::Tensor ImageClassDataset::targets(int64_t first_global_index, int64_t count) const {
  return batch(first_global_index, count).narrow(1, 1, 1).clone();
}

torch::Tensor ImageClassDataset::normalized(const image::Image& image) {
  auto pixels = torch::from_blob(const_cast<uint8_t*>(image.rgb.data()), {image.height, image.width, 3}, torch::kUInt8)
                    .permute({2, 0, 1})
                    .to(torch::kFloat32);
  // ViTImageProcessor: rescale by 1/255, then (x - 0.5) / 0.5, in float32 as numpy computes it.
  return ((pixels * (1.0f / 255.0f)) - 0.5f) / 0.5f;
}

torch::Tensor ImageClassDataset::preprocess(const std::string& path, int64_t image_size) {
  return normalized(
      image::pil_resize(image::decode_image_file(path), image_size, image_size, image::ResampleFilter::Bilinear));
}

torch::Tensor ImageClassDataset::pixel_values(int64_t global_index) const {
  const auto& path = record(global_index).image;
  const int64_t size = options_.image_size;
  if (!options_.augment.any()) return preprocess(path, size).unsqueeze(0);
  const auto decoded = image::decode_image_file(path);
  const auto draw = draw_augment(options_.augment, options_.seed, global_index, decoded.height, decoded.width);
  auto resized = image::pil_resize(image::crop(decoded, draw.box), size, size, image::ResampleFilter::Bilinear);
  if (draw.flipped) resized = image::flip_left_right(resized);
  return normalized(resized).unsqueeze(0);
}

torch::Tensor ImageClassDataset::augmentation(int64_t global_index) const {
  if (!options_.augment.any()) return {};
  const auto decoded = image::decode_image_file(record(global_index).image);
  const auto draw = draw_augment(options_.augment, options_.seed, global_index, decoded.height, decoded.width);
  return torch::tensor({draw.box.top, draw.box.left, draw.box.height, draw.box.width, int64_t{draw.flipped}});
}

std::string ImageClassDataset::notes() const {
  return fmt::format("{} images of {} labels", records_.size(), options_.num_labels);
}

}  // namespace xtrain::data

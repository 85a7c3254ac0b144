#include "data/image_text_dataset.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "data/pixel_tensor.h"
#include "image/image_decode.h"
#include "util/input_error.h"

namespace xtrain::data {
namespace {

std::string image_text_fix() {
  return "each line is {\"image\": \"PATH\", \"caption\": \"TEXT\"}, PATH relative to the file (docs/models.md, "
         "Contrastive image-text)";
}

}  // namespace

ImageTextDataset::ImageTextDataset(const std::string& jsonl_path, const text::Tokenizer& tokenizer,
                                   ImageTextOptions options)
    : options_(std::move(options)), order_(options_.seed, options_.shuffle) {
  std::ifstream in(jsonl_path);
  if (!in) throw InputError(fmt::format("{}: cannot read the file", jsonl_path));
  const std::filesystem::path folder = std::filesystem::path(jsonl_path).parent_path();
  const auto length = static_cast<size_t>(options_.seq_len);
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", jsonl_path, number);
    const auto json = nlohmann::json::parse(line, nullptr, false);
    if (json.is_discarded() || !json.is_object() || !json.contains("image") || !json.at("image").is_string() ||
        !json.contains("caption") || !json.at("caption").is_string())
      throw InputError(fmt::format("{}: not an image-caption record; {}", where, image_text_fix()));
    auto tokens = tokenizer.encode(json.at("caption").get<std::string>());
    if (tokens.empty())
      throw InputError(fmt::format("{}: the caption is empty; give each image a caption of at least one token",
                                   where));
    if (tokens.size() + 1 > length) {
      tokens.resize(length - 1);
      ++truncated_;
    }
    tokens.resize(length + 1, options_.end_id);  // closed by end_id, then padded with it
    const auto path = json.at("image").get<std::string>();
    Record record{std::filesystem::path(path).is_absolute() ? path : (folder / path).string(), std::move(tokens)};
    try {
      image::decode_image_file(record.image);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: image \"{}\": {} (correct the record; a relative path is read from {})",
                                   where, path, e.what(), folder.empty() ? std::string(".") : folder.string()));
    }
    records_.push_back(std::move(record));
  }
  if (records_.empty()) throw InputError(fmt::format("{}: no image-caption records; {}", jsonl_path, image_text_fix()));
}

const ImageTextDataset::Record& ImageTextDataset::record(int64_t global_index) const {
  return records_[static_cast<size_t>(order_.sample(global_index, num_samples()))];
}

torch::Tensor ImageTextDataset::batch(int64_t first_global_index, int64_t count) const {
  auto out = torch::empty({count, options_.seq_len + 1}, torch::kInt64);
  for (int64_t i = 0; i < count; ++i) {
    const auto& tokens = record(first_global_index + i).tokens;
    std::copy(tokens.begin(), tokens.end(), out[i].data_ptr<int64_t>());
  }
  return out;
}

torch::Tensor ImageTextDataset::targets(int64_t /*first_global_index*/, int64_t count) const {
  auto out = torch::full({count, options_.seq_len}, kIgnoreIndex, torch::kInt64);
  out.select(1, 0).fill_(0);
  return out;
}

torch::Tensor ImageTextDataset::pixel_values(int64_t global_index) const {
  const auto& path = record(global_index).image;
  return pixel_tensor(image::preprocess(image::decode_image_file(path), options_.processor)).unsqueeze(0);
}

std::string ImageTextDataset::notes() const {
  return fmt::format("{} image-caption pairs{}", records_.size(),
                     truncated_ > 0 ? fmt::format(" ({} captions cut to {} tokens)", truncated_, options_.seq_len)
                                    : std::string());
}

}  // namespace xtrain::data

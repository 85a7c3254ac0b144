#include "data/image_chat_dataset.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <torch/torch.h>

#include "data/sources/document_reader.h"
#include "data/pixel_tensor.h"
#include "data/token_dataset.h"
#include "image/image_decode.h"
#include "util/input_error.h"

namespace xtrain::data {
namespace {

std::string resolve(const std::filesystem::path& folder, const std::string& path) {
  const std::filesystem::path image(path);
  return image.is_absolute() ? path : (folder / image).lexically_normal().string();
}

// The first decoding error of each record's images, "" for a record whose images all decode;
// records are shared among `workers` threads.
std::vector<std::string> image_problems(const std::vector<std::vector<std::string>>& images, int workers) {
  std::vector<std::string> problems(images.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t r = next++; r < images.size(); r = next++) {
      for (size_t i = 0; i < images[r].size() && problems[r].empty(); ++i) {
        try {
          image::decode_image_file(images[r][i]);
        } catch (const InputError& e) {
          problems[r] = fmt::format("image {} of {}: {}", i + 1, images[r].size(), e.what());
        }
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < std::max(workers, 1); ++t) threads.emplace_back(work);
  work();
  for (auto& thread : threads) thread.join();
  return problems;
}

}  // namespace

ImageChatDataset::ImageChatDataset(const std::string& jsonl_path, const text::Tokenizer& tokenizer,
                                   ImageChatOptions options)
    : options_(std::move(options)), eos_id_(tokenizer.eos_id()), order_(options_.seed, options_.shuffle) {
  read_records(jsonl_path, tokenizer);
  if (records_.empty())
    throw InputError(fmt::format("{}: no record left to train on ({} skipped for bad images)", jsonl_path,
                                 skipped_records_));
  std::vector<double> counts(static_cast<size_t>(tokenizer.vocab_size()), 0.0);
  double targets = 0;
  for (const auto& record : records_) {
    num_tokens_ += static_cast<int64_t>(record.tokens.size());
    num_images_ += static_cast<int64_t>(record.images.size());
    for (size_t i = 0; i < record.tokens.size(); ++i) {
      const auto token = static_cast<size_t>(record.tokens[i]);
      if (!record.loss_mask[i] || token >= counts.size()) continue;
      counts[token] += 1;
      targets += 1;
    }
  }
  if (targets > 0)
    for (auto& count : counts) count /= targets;
  unigram_entropy_ = targets > 0 ? entropy_of(counts) : 0.0;
}

// Reads and encodes every record, then checks its images; a record's place is file:line.
void ImageChatDataset::read_records(const std::string& jsonl_path, const text::Tokenizer& tokenizer) {
  const std::filesystem::path folder = std::filesystem::path(jsonl_path).parent_path();
  const DocumentEncoder encoder(tokenizer, text::ChatTemplate::parse(options_.chat_template), options_.placeholder);
  const int64_t window = options_.seq_len + 1;
  DocumentReader reader({{DocumentInput::Kind::JsonlFile, jsonl_path, {}}});
  std::vector<std::string> places;
  while (auto chunk = reader.next()) {
    for (size_t i = 0; i < chunk->items.size(); ++i) {
      const std::string where = fmt::format("{}:{}", chunk->name, chunk->first_line + static_cast<int64_t>(i));
      auto document = parse_jsonl_record(chunk->items[i], where, RecordForm::Conversation);
      if (!document) continue;
      EncodedDocument encoded;
      try {
        encoded = encoder.encode(*document);
      } catch (const InputError& e) {
        throw InputError(where + ": " + e.what());
      }
      if (static_cast<int64_t>(encoded.tokens.size()) > window) {
        const auto last_image = std::find(encoded.tokens.rbegin(), encoded.tokens.rend(), options_.placeholder.id);
        // Every image token must be an input: the last one's 1-based position is the least seq_len.
        const auto needed = static_cast<int64_t>(encoded.tokens.rend() - last_image);
        if (last_image != encoded.tokens.rend() && needed > options_.seq_len)
          throw InputError(fmt::format("{}: the record's image tokens end at token {}, past data.seq_len {}: raise "
                                       "data.seq_len to at least {}, or shorten the text before the last image",
                                       where, needed, options_.seq_len, needed));
        encoded.tokens.resize(static_cast<size_t>(window));
        encoded.loss_mask.resize(static_cast<size_t>(window));
        ++truncated_records_;
      }
      Record record{std::move(encoded.tokens), std::move(encoded.loss_mask), {}};
      for (const auto& image : document->images) record.images.push_back(resolve(folder, image));
      records_.push_back(std::move(record));
      places.push_back(where);
    }
  }
  check_images(places);
}

void ImageChatDataset::check_images(const std::vector<std::string>& places) {
  std::vector<std::vector<std::string>> images;
  for (const auto& record : records_) images.push_back(record.images);
  const std::vector<std::string> problems = image_problems(images, options_.workers);
  std::vector<Record> kept;
  for (size_t r = 0; r < records_.size(); ++r) {
    if (problems[r].empty()) {
      kept.push_back(std::move(records_[r]));
      continue;
    }
    if (!options_.skip_bad_images)
      throw InputError(fmt::format("{}: {}. Repair or remove the record, or set data.skip_bad_images: true to "
                                   "leave out records whose images do not decode",
                                   places[r], problems[r]));
    ++skipped_records_;
  }
  records_ = std::move(kept);
}

const ImageChatDataset::Record& ImageChatDataset::record(int64_t global_index) const {
  return records_[static_cast<size_t>(order_.sample(global_index, num_samples()))];
}

void ImageChatDataset::read_sample(int64_t global_index, int64_t* tokens, int64_t* targets) const {
  const Record& r = record(global_index);
  const int64_t window = options_.seq_len + 1;
  const auto length = static_cast<int64_t>(r.tokens.size());
  for (int64_t i = 0; i < window; ++i) tokens[i] = i < length ? r.tokens[static_cast<size_t>(i)] : eos_id_;
  if (!targets) return;
  for (int64_t i = 1; i < window; ++i)
    targets[i - 1] = i < length && r.loss_mask[static_cast<size_t>(i)] ? tokens[i] : kIgnoreIndex;
}

torch::Tensor ImageChatDataset::batch(int64_t first_global_index, int64_t count) const {
  auto out = torch::empty({count, options_.seq_len + 1}, torch::kInt64);
  for (int64_t i = 0; i < count; ++i) read_sample(first_global_index + i, out[i].data_ptr<int64_t>(), nullptr);
  return out;
}

torch::Tensor ImageChatDataset::targets(int64_t first_global_index, int64_t count) const {
  auto tokens = torch::empty({options_.seq_len + 1}, torch::kInt64);
  auto out = torch::empty({count, options_.seq_len}, torch::kInt64);
  for (int64_t i = 0; i < count; ++i)
    read_sample(first_global_index + i, tokens.data_ptr<int64_t>(), out[i].data_ptr<int64_t>());
  return out;
}

std::vector<int64_t> ImageChatDataset::document_starts(int64_t global_index) const {
  const auto length = static_cast<int64_t>(record(global_index).tokens.size());
  if (length > options_.seq_len) return {};
  return {length};
}

torch::Tensor ImageChatDataset::pixel_values(int64_t global_index) const {
  const Record& r = record(global_index);
  if (r.images.empty()) return {};
  std::vector<torch::Tensor> pixels;
  for (const auto& file : r.images)
    pixels.push_back(pixel_tensor(image::preprocess(image::decode_image_file(file), options_.processor)));
  return torch::stack(pixels);
}

double ImageChatDataset::vision_cost(int64_t global_index) const {
  const auto tokens = static_cast<double>(options_.placeholder.tokens);
  return static_cast<double>(record(global_index).images.size()) * tokens * tokens;
}

std::string ImageChatDataset::notes() const {
  std::string notes = fmt::format("{} images, {} image tokens each", num_images_, options_.placeholder.tokens);
  if (skipped_records_ > 0)
    notes += fmt::format("; skipped {} record{} with bad images", skipped_records_, skipped_records_ == 1 ? "" : "s");
  if (truncated_records_ > 0)
    notes += fmt::format("; {} records cut to data.seq_len + 1 = {} tokens", truncated_records_, options_.seq_len + 1);
  return notes;
}

}  // namespace xtrain::data

#include "data/sources/document_reader.h"

#include <utility>

#include "util/input_error.h"
#include "util/posix_file.h"

namespace xtrain::data {
namespace {

constexpr size_t kReadBytes = 1 << 20;

bool is_blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

std::string read_text_file(const std::string& path) {
  util::InputFile file(path);
  std::string text;
  if (file.is_regular()) text.reserve(file.size());
  char buffer[1 << 16];
  for (size_t got; (got = file.read(buffer, sizeof buffer)) > 0;) text.append(buffer, got);
  if (text.empty()) throw InputError(path + ": file is empty");
  return text;
}

}  // namespace

DocumentReader::DocumentReader(std::vector<DocumentInput> inputs, size_t chunk_bytes)
    : inputs_(std::move(inputs)), chunk_bytes_(chunk_bytes) {
  for (const auto& input : inputs_) {
    if (input.kind == DocumentInput::Kind::Texts) {
      for (const auto& text : input.texts) total_bytes_ += text.size();
    } else {
      total_bytes_ += util::InputFile(input.name).size();
    }
  }
}

DocumentReader::~DocumentReader() = default;

std::optional<RawChunk> DocumentReader::next() {
  while (input_ < inputs_.size()) {
    DocumentInput& input = inputs_[input_];
    switch (input.kind) {
      case DocumentInput::Kind::TextFile: {
        RawChunk chunk{input.name, 0, {read_text_file(input.name)}, 0};
        chunk.bytes = chunk.items[0].size();
        ++input_;
        return chunk;
      }
      case DocumentInput::Kind::Texts: {
        RawChunk chunk{input.name, 0, {}, 0};
        while (text_ < input.texts.size() && chunk.bytes < chunk_bytes_) {
          chunk.bytes += input.texts[text_].size();
          chunk.items.push_back(std::move(input.texts[text_++]));
        }
        if (text_ == input.texts.size()) {
          ++input_;
          text_ = 0;
        }
        if (!chunk.items.empty()) return chunk;
        break;
      }
      case DocumentInput::Kind::JsonlFile:
        if (auto chunk = next_jsonl_lines()) return chunk;
        break;
    }
  }
  return std::nullopt;
}

std::optional<RawChunk> DocumentReader::next_jsonl_lines() {
  const std::string& name = inputs_[input_].name;
  if (!file_) {
    file_ = std::make_unique<util::InputFile>(name);
    pending_.clear();
    line_ = 0;
    has_record_ = false;
  }
  RawChunk chunk{name, line_ + 1, {}, 0};
  bool at_end = false;
  while (chunk.bytes < chunk_bytes_ && !at_end) {
    size_t start = 0;
    for (size_t newline; (newline = pending_.find('\n', start)) != std::string::npos && chunk.bytes < chunk_bytes_;
         start = newline + 1) {
      chunk.items.emplace_back(pending_, start, newline - start);
      chunk.bytes += newline - start + 1;
    }
    pending_.erase(0, start);
    if (chunk.bytes >= chunk_bytes_) break;
    const size_t old_size = pending_.size();
    pending_.resize(old_size + kReadBytes);
    const size_t got = file_->read(pending_.data() + old_size, kReadBytes);
    pending_.resize(old_size + got);
    if (got == 0) {
      at_end = true;
      if (!pending_.empty()) {  // the last line has no newline
        chunk.bytes += pending_.size();
        chunk.items.push_back(std::move(pending_));
        pending_.clear();
      }
    }
  }
  line_ += static_cast<int64_t>(chunk.items.size());
  for (const auto& item : chunk.items) has_record_ = has_record_ || !is_blank(item);
  if (at_end) {
    file_.reset();
    ++input_;
    if (!has_record_) throw InputError(name + ": no documents (expected one JSON object per line)");
  }
  if (chunk.items.empty()) return std::nullopt;
  return chunk;
}

std::vector<Document> parse_chunk(const RawChunk& chunk, RecordForm form) {
  std::vector<Document> documents;
  documents.reserve(chunk.items.size());
  if (chunk.first_line == 0) {
    for (const auto& text : chunk.items) documents.push_back({text, {}, false, {}});
    return documents;
  }
  for (size_t i = 0; i < chunk.items.size(); ++i) {
    const std::string where = chunk.name + ":" + std::to_string(chunk.first_line + static_cast<int64_t>(i));
    if (auto document = parse_jsonl_record(chunk.items[i], where, form)) documents.push_back(std::move(*document));
  }
  return documents;
}

}  // namespace xtrain::data

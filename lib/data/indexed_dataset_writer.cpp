#include "data/indexed_dataset_writer.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "util/durable_file.h"
#include "util/input_error.h"

namespace xtrain::data {
namespace {

constexpr size_t kFlushBytes = 4 << 20;

std::string temporary(const std::string& path) { return path + ".tmp"; }

template <class T>
void append(std::vector<uint8_t>& buffer, const int64_t* ids, int64_t count) {
  const size_t start = buffer.size();
  buffer.resize(start + sizeof(T) * static_cast<size_t>(count));
  T* out = reinterpret_cast<T*>(buffer.data() + start);
  for (int64_t i = 0; i < count; ++i) {
    if (ids[i] < std::numeric_limits<T>::min() || ids[i] > std::numeric_limits<T>::max()) {
      buffer.resize(start);
      throw std::out_of_range(fmt::format("token id {} does not fit the dataset's {}-byte ids", ids[i], sizeof(T)));
    }
    out[i] = static_cast<T>(ids[i]);
  }
}

template <class T>
void append_raw(std::string& out, const T* values, size_t count) {
  out.append(reinterpret_cast<const char*>(values), sizeof(T) * count);
}

}  // namespace

IndexedDatasetWriter::IndexedDatasetWriter(std::string prefix, IndexedDType dtype)
    : prefix_(std::move(prefix)), dtype_(dtype), bin_(util::OutputFile::create(temporary(data_path(prefix_)))) {
  if (!is_integer(dtype)) throw std::invalid_argument("token ids need an integer dtype");
  buffer_.reserve(kFlushBytes + (1 << 16));
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (finished_) return;
  std::remove(temporary(data_path(prefix_)).c_str());
  std::remove(temporary(index_path(prefix_)).c_str());
}

void IndexedDatasetWriter::add_document(const int64_t* ids, int64_t count) {
  if (count > std::numeric_limits<int32_t>::max())
    throw InputError(fmt::format("{}: document {} has {} tokens; the format stores sizes as int32 (split it)",
                                 prefix_, sizes_.size(), count));
  switch (dtype_) {
    case IndexedDType::UInt8: append<uint8_t>(buffer_, ids, count); break;
    case IndexedDType::Int8: append<int8_t>(buffer_, ids, count); break;
    case IndexedDType::Int16: append<int16_t>(buffer_, ids, count); break;
    case IndexedDType::UInt16: append<uint16_t>(buffer_, ids, count); break;
    case IndexedDType::Int32: append<int32_t>(buffer_, ids, count); break;
    case IndexedDType::Int64: append<int64_t>(buffer_, ids, count); break;
    default: throw std::invalid_argument("token ids need an integer dtype");
  }
  sizes_.push_back(static_cast<int32_t>(count));
  num_tokens_ += count;
  if (buffer_.size() >= kFlushBytes) flush();
}

void IndexedDatasetWriter::flush() {
  bin_.write(buffer_.data(), buffer_.size());
  buffer_.clear();
}

void IndexedDatasetWriter::finish() {
  flush();
  bin_.sync();
  bin_.close();

  const auto sequences = static_cast<uint64_t>(sizes_.size());
  std::vector<int64_t> pointers(sizes_.size());
  std::vector<int64_t> document_index(sizes_.size() + 1);
  const auto item = static_cast<int64_t>(indexed_dtype_size(dtype_));
  int64_t offset = 0;
  for (size_t i = 0; i < sizes_.size(); ++i) {
    pointers[i] = offset;
    offset += sizes_[i] * item;
    document_index[i + 1] = static_cast<int64_t>(i + 1);
  }
  const auto document_entries = static_cast<uint64_t>(document_index.size());
  const auto code = static_cast<uint8_t>(dtype_);
  std::string index;
  index.reserve(kIndexHeaderBytes + 20 * sizes_.size() + 8);
  index.append(kIndexMagic, sizeof kIndexMagic);
  append_raw(index, &kIndexVersion, 1);
  append_raw(index, &code, 1);
  append_raw(index, &sequences, 1);
  append_raw(index, &document_entries, 1);
  append_raw(index, sizes_.data(), sizes_.size());
  append_raw(index, pointers.data(), pointers.size());
  append_raw(index, document_index.data(), document_index.size());
  util::write_file_durable(temporary(index_path(prefix_)), index);

  for (const auto& path : {data_path(prefix_), index_path(prefix_)})
    if (std::rename(temporary(path).c_str(), path.c_str()) != 0) util::throw_errno("rename to", path);
  const std::string parent = std::filesystem::path(prefix_).parent_path().string();
  util::fsync_path(parent.empty() ? "." : parent);
  finished_ = true;
}

}  // namespace xtrain::data

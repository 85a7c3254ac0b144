#include "data/sources/indexed_dataset.h"

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "util/input_error.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the indexed dataset format is little-endian");

namespace xtrain::data {
namespace {

// The .idx arrays start at byte 34, so they are not aligned for their types.
template <class T>
T load(const uint8_t* bytes) {
  T value;
  std::memcpy(&value, bytes, sizeof(T));
  return value;
}

template <class T>
void convert(const uint8_t* data, int64_t count, int64_t* out) {
  const T* values = reinterpret_cast<const T*>(data);
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<int64_t>(values[i]);
}

constexpr const char* kRewrite = "; write it again (xtrain data prepare) or check that .idx and .bin belong together";

}  // namespace

int64_t TokenView::operator[](int64_t i) const {
  int64_t value = 0;
  copy_to(i, 1, &value);
  return value;
}

void TokenView::copy_to(int64_t begin, int64_t count, int64_t* out) const {
  if (begin < 0 || count < 0 || begin + count > size_)
    throw std::out_of_range(fmt::format("ids [{}, {}) outside a view of {}", begin, begin + count, size_));
  const uint8_t* first = data_ + static_cast<size_t>(begin) * indexed_dtype_size(dtype_);
  switch (dtype_) {
    case IndexedDType::UInt8: return convert<uint8_t>(first, count, out);
    case IndexedDType::Int8: return convert<int8_t>(first, count, out);
    case IndexedDType::Int16: return convert<int16_t>(first, count, out);
    case IndexedDType::UInt16: return convert<uint16_t>(first, count, out);
    case IndexedDType::Int32: return convert<int32_t>(first, count, out);
    case IndexedDType::Int64: return convert<int64_t>(first, count, out);
    case IndexedDType::Float32: return convert<float>(first, count, out);
    case IndexedDType::Float64: return convert<double>(first, count, out);
  }
}

std::vector<int64_t> TokenView::to_vector() const {
  std::vector<int64_t> ids(static_cast<size_t>(size_));
  copy_to(0, size_, ids.data());
  return ids;
}

TokenView TokenView::slice(int64_t begin, int64_t count) const {
  if (begin < 0 || count < 0 || begin + count > size_)
    throw std::out_of_range(fmt::format("slice [{}, {}) outside a view of {}", begin, begin + count, size_));
  return {data_ + static_cast<size_t>(begin) * indexed_dtype_size(dtype_), count, dtype_};
}

IndexedDataset::IndexedDataset(const std::string& prefix)
    : prefix_(prefix), index_(index_path(prefix)), data_(data_path(prefix)) {
  check_index();
}

void IndexedDataset::check_index() {
  const std::string idx = index_path(prefix_);
  const uint8_t* bytes = index_.data();
  const size_t size = index_.size();
  if (size >= sizeof kIndexMagic && size < kIndexHeaderBytes && std::memcmp(bytes, kIndexMagic, sizeof kIndexMagic) == 0)
    throw InputError(fmt::format("{}: truncated: {} bytes, too few for the {}-byte header{}", idx, size,
                                 kIndexHeaderBytes, kRewrite));
  if (size < kIndexHeaderBytes || std::memcmp(bytes, kIndexMagic, sizeof kIndexMagic) != 0)
    throw InputError(idx + ": not a Megatron indexed dataset index (it does not start with MMIDIDX\\0\\0); "
                     "data sources of this form are written by xtrain data prepare or Megatron's preprocess_data.py");
  const auto version = load<uint64_t>(bytes + 9);
  if (version != kIndexVersion)
    throw InputError(fmt::format("{}: index version {} is not supported (expected 1)", idx, version));
  const auto dtype = indexed_dtype_from_code(bytes[17]);
  if (!dtype) throw InputError(fmt::format("{}: unknown dtype code {} (expected 1 to 8){}", idx, bytes[17], kRewrite));
  dtype_ = *dtype;
  const auto sequences = load<uint64_t>(bytes + 18);
  const auto document_entries = load<uint64_t>(bytes + 26);
  // Each sequence takes 12 bytes of index, each document entry 8: counts beyond the file's
  // size cannot be right, and bounding them first keeps the size arithmetic from overflowing.
  const size_t available = size - kIndexHeaderBytes;
  if (sequences > available / 12 || document_entries > available / 8 ||
      kIndexHeaderBytes + 12 * sequences + 8 * document_entries > size)
    throw InputError(fmt::format("{}: truncated: {} bytes, too few for the {} sequences and {} document index "
                                 "entries its header announces{}",
                                 idx, size, sequences, document_entries, kRewrite));
  if (document_entries < 1)
    throw InputError(idx + ": the document index is empty (it starts with 0 in every valid file)" + kRewrite);
  num_sequences_ = static_cast<int64_t>(sequences);
  num_documents_ = static_cast<int64_t>(document_entries) - 1;
  sizes_offset_ = kIndexHeaderBytes;
  pointers_offset_ = sizes_offset_ + 4 * sequences;
  documents_offset_ = pointers_offset_ + 8 * sequences;

  const int64_t item = static_cast<int64_t>(indexed_dtype_size(dtype_));
  int64_t tokens = 0;
  for (int64_t i = 0; i < num_sequences_; ++i) {
    const int64_t sequence_size = this->sequence_size(i);
    if (sequence_size < 0)
      throw InputError(fmt::format("{}: sequence {} has a negative size {}{}", idx, i, sequence_size, kRewrite));
    if (sequence_pointer(i) != tokens * item)
      throw InputError(fmt::format("{}: sequence {} starts at byte {} of the .bin, but the sizes before it end at "
                                   "byte {} (pointers must be the cumulative sizes){}",
                                   idx, i, sequence_pointer(i), tokens * item, kRewrite));
    tokens += sequence_size;
  }
  num_tokens_ = tokens;
  int64_t previous = 0;
  for (int64_t d = 0; d <= num_documents_; ++d) {
    const int64_t entry = document_index(d);
    if ((d == 0 && entry != 0) || entry < previous || entry > num_sequences_)
      throw InputError(fmt::format("{}: document index entry {} is {}: entries must start at 0 and rise to the "
                                   "sequence count {}{}",
                                   idx, d, entry, num_sequences_, kRewrite));
    previous = entry;
  }
  if (previous != num_sequences_)
    throw InputError(fmt::format("{}: the document index ends at sequence {}, not at the sequence count {}{}", idx,
                                 previous, num_sequences_, kRewrite));
  const auto expected_bin = static_cast<size_t>(num_tokens_ * item);
  if (data_.size() != expected_bin)
    throw InputError(fmt::format("{}: {} bytes, but {} describes {} {} ids ({} bytes){}", data_path(prefix_),
                                 data_.size(), idx, num_tokens_, indexed_dtype_name(dtype_), expected_bin, kRewrite));
}

int64_t IndexedDataset::sequence_size(int64_t i) const {
  if (i < 0 || i >= num_sequences_)
    throw std::out_of_range(fmt::format("sequence {} of {} in {}", i, num_sequences_, prefix_));
  return load<int32_t>(index_.data() + sizes_offset_ + 4 * static_cast<size_t>(i));
}

int64_t IndexedDataset::sequence_pointer(int64_t i) const {
  return load<int64_t>(index_.data() + pointers_offset_ + 8 * static_cast<size_t>(i));
}

int64_t IndexedDataset::sequence_start(int64_t i) const {
  if (i < 0 || i >= num_sequences_)
    throw std::out_of_range(fmt::format("sequence {} of {} in {}", i, num_sequences_, prefix_));
  return sequence_pointer(i) / static_cast<int64_t>(indexed_dtype_size(dtype_));
}

int64_t IndexedDataset::document_index(int64_t d) const {
  return load<int64_t>(index_.data() + documents_offset_ + 8 * static_cast<size_t>(d));
}

TokenView IndexedDataset::sequence(int64_t i) const {
  const int64_t size = sequence_size(i);
  return {data_.data() + sequence_pointer(i), size, dtype_};
}

std::pair<int64_t, int64_t> IndexedDataset::document_sequences(int64_t d) const {
  if (d < 0 || d >= num_documents_)
    throw std::out_of_range(fmt::format("document {} of {} in {}", d, num_documents_, prefix_));
  return {document_index(d), document_index(d + 1)};
}

TokenView IndexedDataset::document(int64_t d) const {
  const auto [first, end] = document_sequences(d);
  if (first == end) return {data_.data(), 0, dtype_};
  const int64_t item = static_cast<int64_t>(indexed_dtype_size(dtype_));
  const int64_t begin = sequence_pointer(first);
  const int64_t stop = sequence_pointer(end - 1) + sequence_size(end - 1) * item;
  return {data_.data() + begin, (stop - begin) / item, dtype_};
}

}  // namespace xtrain::data

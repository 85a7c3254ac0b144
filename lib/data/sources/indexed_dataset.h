// IndexedDataset: reads a Megatron-LM indexed dataset (PREFIX.idx + PREFIX.bin, layout in
// indexed_dataset_format.h) in place: both files are memory-mapped, and sequences and
// documents are zero-copy views into the .bin. The whole index is checked when opening
// (header, sizes, contiguous pointers, document index, .bin size), so a missing, truncated or
// inconsistent file is an InputError naming it rather than a wrong read later.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/sources/indexed_dataset_format.h"
#include "util/mapped_file.h"

namespace xtrain::data {

// ids of one dtype, read in place; values come out as int64.
class TokenView {
 public:
  TokenView() = default;
  TokenView(const uint8_t* data, int64_t size, IndexedDType dtype) : data_(data), size_(size), dtype_(dtype) {}

  int64_t size() const { return size_; }
  IndexedDType dtype() const { return dtype_; }
  const void* data() const { return data_; }
  int64_t operator[](int64_t i) const;
  // Copies the ids [begin, begin + count) into out.
  void copy_to(int64_t begin, int64_t count, int64_t* out) const;
  std::vector<int64_t> to_vector() const;
  TokenView slice(int64_t begin, int64_t count) const;

 private:
  const uint8_t* data_ = nullptr;
  int64_t size_ = 0;
  IndexedDType dtype_ = IndexedDType::Int32;
};

class IndexedDataset {
 public:
  // prefix: the path without .idx / .bin.
  explicit IndexedDataset(const std::string& prefix);

  const std::string& prefix() const { return prefix_; }
  IndexedDType dtype() const { return dtype_; }
  int64_t num_sequences() const { return num_sequences_; }
  int64_t num_documents() const { return num_documents_; }
  int64_t num_tokens() const { return num_tokens_; }

  int64_t sequence_size(int64_t i) const;
  // The offset (in ids) of sequence i's first id in the .bin.
  int64_t sequence_start(int64_t i) const;
  TokenView sequence(int64_t i) const;
  // The sequences [first, end) of document d.
  std::pair<int64_t, int64_t> document_sequences(int64_t d) const;
  // Document d: its sequences, which lie back to back in the .bin.
  TokenView document(int64_t d) const;
  // Every id of the .bin, in order.
  TokenView tokens() const { return {data_.data(), num_tokens_, dtype_}; }

 private:
  void check_index();
  int64_t sequence_pointer(int64_t i) const;
  int64_t document_index(int64_t d) const;

  std::string prefix_;
  util::MappedFile index_;
  util::MappedFile data_;
  IndexedDType dtype_ = IndexedDType::Int32;
  int64_t num_sequences_ = 0;
  int64_t num_documents_ = 0;
  int64_t num_tokens_ = 0;
  size_t sizes_offset_ = 0, pointers_offset_ = 0, documents_offset_ = 0;
};

}  // namespace xtrain::data

// IndexedDatasetWriter: writes a Megatron-LM indexed dataset (layout in
// indexed_dataset_format.h) byte for byte as Megatron's IndexedDatasetBuilder does with one
// add_document per document and finalize(): ids are appended to PREFIX.bin as they come, and
// finish() writes PREFIX.idx. Both files are written under temporary names (PREFIX.bin.tmp,
// PREFIX.idx.tmp), synced and renamed into place only by finish(), so an interrupted write
// never leaves a pair that looks complete. Write failures (disk full) are std::runtime_error.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/sources/indexed_dataset_format.h"
#include "util/posix_file.h"

namespace xtrain::data {

class IndexedDatasetWriter {
 public:
  // dtype: an integer dtype wide enough for every id written (see token_dtype_for_vocab).
  IndexedDatasetWriter(std::string prefix, IndexedDType dtype);
  // Without finish(), the temporary files are removed.
  ~IndexedDatasetWriter();
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  // One document of one sequence. An id outside the dtype's range is std::out_of_range.
  void add_document(const int64_t* ids, int64_t count);
  void add_document(const std::vector<int64_t>& ids) { add_document(ids.data(), static_cast<int64_t>(ids.size())); }
  void finish();

  int64_t num_documents() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t num_tokens() const { return num_tokens_; }

 private:
  void flush();

  std::string prefix_;
  IndexedDType dtype_;
  util::OutputFile bin_;
  std::vector<uint8_t> buffer_;
  std::vector<int32_t> sizes_;
  int64_t num_tokens_ = 0;
  bool finished_ = false;
};

}  // namespace xtrain::data

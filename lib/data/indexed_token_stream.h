// IndexedTokenStream: the ids of a Megatron indexed dataset (megatron:PREFIX), read in place
// from the memory-mapped .bin: all sequences back to back, in file order. The documents of such
// a file already end with the EOS id when it was written with EOS appended (xtrain data
// prepare; Megatron's preprocess_data.py --append-eod). A sibling dataset PREFIX.loss_mask
// (uint8, 1 = target, the same sizes), written by `xtrain data prepare --format chat`, is the
// loss mask.
// Ids at or above vocab_size mean the data was tokenized with another tokenizer: the first
// million ids are checked when opening, every id when it is read; both are InputErrors.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "data/sources/indexed_dataset.h"
#include "data/token_stream.h"

namespace xtrain::data {

class IndexedTokenStream final : public TokenStream {
 public:
  IndexedTokenStream(const std::string& prefix, int64_t vocab_size);

  int64_t size() const override { return tokens_.num_tokens(); }
  void read(int64_t begin, int64_t count, int64_t* out) const override;
  bool has_loss_mask() const override { return loss_mask_.has_value(); }
  void read_loss_mask(int64_t begin, int64_t count, uint8_t* out) const override;
  // Each sequence of the file is a document (Megatron's GPT datasets read them so).
  void document_starts(int64_t begin, int64_t count, std::vector<int64_t>& out) const override;

  static std::string loss_mask_prefix(const std::string& prefix) { return prefix + ".loss_mask"; }

 private:
  void check_ids(const int64_t* ids, int64_t count, int64_t begin) const;

  IndexedDataset tokens_;
  std::optional<IndexedDataset> loss_mask_;
  int64_t vocab_size_;
};

}  // namespace xtrain::data

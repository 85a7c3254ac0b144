// TokenStream: the token ids of one data source in document order, every document followed
// by the tokenizer's EOS id, where each document begins, with an optional loss mask: whether each token is a target of the
// next-token loss (chat data trains on the assistant's turns only). Reads copy out int64 ids,
// so a stream may keep its ids in any width, in memory or mapped from a file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/document_encoder.h"

namespace xtrain::data {

class TokenStream {
 public:
  virtual ~TokenStream() = default;
  virtual int64_t size() const = 0;
  // Copies the ids [begin, begin + count) into out.
  virtual void read(int64_t begin, int64_t count, int64_t* out) const = 0;
  // Without a loss mask, every token is a target.
  virtual bool has_loss_mask() const = 0;
  // Copies the mask of [begin, begin + count) into out (1: a target). Only with a loss mask.
  virtual void read_loss_mask(int64_t begin, int64_t count, uint8_t* out) const = 0;
  // Appends to out the offsets in (begin, begin + count] at which a document begins, ascending.
  virtual void document_starts(int64_t begin, int64_t count, std::vector<int64_t>& out) const = 0;
};

// Ids held in memory: sources that are tokenized when a run starts.
class InMemoryTokenStream final : public TokenStream {
 public:
  void append(const EncodedDocument& document);
  void reserve(size_t tokens) { tokens_.reserve(tokens); }

  int64_t size() const override { return static_cast<int64_t>(tokens_.size()); }
  void read(int64_t begin, int64_t count, int64_t* out) const override;
  bool has_loss_mask() const override { return !loss_mask_.empty(); }
  void read_loss_mask(int64_t begin, int64_t count, uint8_t* out) const override;
  void document_starts(int64_t begin, int64_t count, std::vector<int64_t>& out) const override;

 private:
  std::vector<int64_t> tokens_;
  std::vector<int64_t> document_starts_;
  std::vector<uint8_t> loss_mask_;  // empty until a document brings one
};

}  // namespace xtrain::data

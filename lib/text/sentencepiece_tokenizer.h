// SentencePieceTokenizer: a SentencePiece model file (.model, unigram or BPE) through
// libsentencepiece (loaded as a module, see sentencepiece_module/sentencepiece_backend.h).
// encode() is SentencePiece's default Encode: the model's normalisation and pieces, with neither <s> nor
// </s> added (as Python's sp.encode(text)); documents are separated by eos_id(), the model's
// </s>, so a model without one is refused.
#pragma once
#include <memory>
#include <string>

#include "text/sentencepiece_module/sentencepiece_backend.h"
#include "text/tokenizer.h"

namespace xtrain::text {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // InputError when the file cannot be read or is not a SentencePiece model.
  explicit SentencePieceTokenizer(const std::string& path);
  ~SentencePieceTokenizer() override;

  std::vector<int64_t> encode(std::string_view text) const override;
  // Ids outside the vocabulary are skipped; control pieces (<s>, </s>) render as nothing.
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override;
  int64_t eos_id() const override;
  std::string name() const override { return "sentencepiece:" + path_; }

 private:
  std::string path_;
  std::unique_ptr<SentencePieceBackend> backend_;
};

}  // namespace xtrain::text

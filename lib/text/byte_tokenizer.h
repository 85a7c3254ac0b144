// ByteTokenizer: the identity tokenizer over UTF-8 bytes. It needs no vocabulary file and
// can represent any input, which makes it the right default for small models and tests.
#pragma once
#include "text/tokenizer.h"

namespace xtrain::text {

class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int64_t kEosId = 256;

  // One id per byte (0..255); no normalisation, so encode/decode round-trips any bytes.
  std::vector<int64_t> encode(std::string_view text) const override;
  // Ids 0..255 become their bytes, which may form invalid UTF-8 (a model can emit half a
  // character); they are passed through unchanged. EOS and other ids outside 0..255 render
  // as nothing.
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return kEosId + 1; }
  int64_t eos_id() const override { return kEosId; }
  std::string name() const override { return "byte"; }
};

}  // namespace xtrain::text

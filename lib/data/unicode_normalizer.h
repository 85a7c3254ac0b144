// UnicodeNormalizer: the `normalizer` of a Hugging Face tokenizer.json, for the forms byte-level
// files use: NFC (Qwen2), NFD, NFKC, NFKD and Sequences of them, through ICU. A file without a
// normalizer (GPT-2, Llama 3) gets the identity.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>
#include <unicode/uversion.h>

U_NAMESPACE_BEGIN  // ICU's versioned namespace (icu_72), aliased as icu
class Normalizer2;
U_NAMESPACE_END

namespace xtrain::data {

class UnicodeNormalizer {
 public:
  // Throws std::invalid_argument for an unsupported normalizer type.
  explicit UnicodeNormalizer(const nlohmann::json& spec);

  std::string normalize(std::string_view text) const;
  bool identity() const { return forms_.empty(); }

 private:
  void add(const nlohmann::json& spec);
  std::vector<const icu::Normalizer2*> forms_;  // applied in order; owned by ICU
};

}  // namespace xtrain::data

// UnicodeNormalizer: the `normalizer` of a Hugging Face tokenizer.json: the Unicode forms NFC
// (Qwen2), NFD, NFKC and NFKD through ICU, BERT's BertNormalizer and Lowercase
// (bert_normalizer.h), and Sequences of them. A file without a normalizer (GPT-2, Llama 3)
// gets the identity.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>
#include <unicode/uversion.h>

U_NAMESPACE_BEGIN  // ICU's versioned namespace (icu_72), aliased as icu
class Normalizer2;
U_NAMESPACE_END

namespace xtrain::text {

class BertNormalizer;

class UnicodeNormalizer {
 public:
  // Throws std::invalid_argument for an unsupported normalizer type.
  explicit UnicodeNormalizer(const nlohmann::json& spec);
  ~UnicodeNormalizer();

  std::string normalize(std::string_view text) const;
  bool identity() const { return steps_.empty(); }

 private:
  struct Step {  // one of the two
    const icu::Normalizer2* form = nullptr;  // owned by ICU
    std::shared_ptr<const BertNormalizer> bert;
  };
  void add(const nlohmann::json& spec);
  std::vector<Step> steps_;  // applied in order
};

}  // namespace xtrain::text

// BertNormalizer: the `BertNormalizer` of a Hugging Face tokenizer.json (and its `Lowercase`,
// the same lowercasing alone). In order: clean_text drops control characters and makes white
// space a plain space; handle_chinese_chars puts a space on either side of each CJK ideograph;
// strip_accents takes the NFD form and drops its nonspacing marks (null: as lowercase);
// lowercase maps each character to its lowercase. The character classes are the library's
// (bert_char_class.h). Bytes that are not UTF-8 read as U+FFFD, which clean_text drops.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace xtrain::text {

class BertNormalizer {
 public:
  struct Options {
    bool clean_text = true;
    bool handle_chinese_chars = true;
    bool strip_accents = true;
    bool lowercase = true;
  };
  explicit BertNormalizer(Options options) : options_(options) {}
  // From {"type": "BertNormalizer", ...} with the library's defaults for absent fields, or
  // {"type": "Lowercase"}. Throws std::invalid_argument for another type.
  static Options options_from(const nlohmann::json& spec);

  std::string normalize(std::string_view text) const;

 private:
  Options options_;
};

}  // namespace xtrain::text

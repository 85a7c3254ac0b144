#include "text/bert_pre_tokenizer.h"

#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "text/bert_char_class.h"
#include "text/utf8.h"

namespace xtrain::text {

BertPreTokenizer::BertPreTokenizer(const nlohmann::json& spec) {
  if (!spec.is_null()) add(spec);
}

void BertPreTokenizer::add(const nlohmann::json& spec) {
  const std::string type = spec.value("type", "");
  if (type == "Sequence") {
    for (const auto& part : spec.at("pretokenizers")) add(part);
  } else if (type == "BertPreTokenizer") {
    split_white_space_ = true;
    isolate_punctuation_ = true;
  } else if (type == "WhitespaceSplit") {
    split_white_space_ = true;
  } else {
    throw std::invalid_argument(fmt::format("unsupported pre_tokenizer type '{}' for a WordPiece model (supported: "
                                            "BertPreTokenizer, WhitespaceSplit, Sequence, or none)",
                                            type.empty() ? "untyped" : type));
  }
}

void BertPreTokenizer::split(std::string_view text, const PieceConsumer& consume) const {
  if (!split_white_space_ && !isolate_punctuation_) {
    if (!text.empty()) consume(text);
    return;
  }
  size_t word = 0;  // start of the word being read
  for (size_t pos = 0; pos < text.size();) {
    const size_t start = pos;
    const char32_t c = utf8::next(text, pos);
    const bool space = split_white_space_ && utf8::is_white_space(c);
    if (!space && !(isolate_punctuation_ && bert::is_punctuation(c))) continue;
    if (start > word) consume(text.substr(word, start - word));
    if (!space) consume(text.substr(start, pos - start));
    word = pos;
  }
  if (word < text.size()) consume(text.substr(word));
}

}  // namespace xtrain::text

#include "text/bert_normalizer.h"

#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "text/bert_char_class.h"
#include "text/utf8.h"

namespace xtrain::text {

BertNormalizer::Options BertNormalizer::options_from(const nlohmann::json& spec) {
  const std::string type = spec.value("type", "");
  if (type == "Lowercase") return {false, false, false, true};
  if (type != "BertNormalizer") throw std::invalid_argument(fmt::format("'{}' is not a BertNormalizer", type));
  Options options;
  options.clean_text = spec.value("clean_text", true);
  options.handle_chinese_chars = spec.value("handle_chinese_chars", true);
  options.lowercase = spec.value("lowercase", true);
  const auto strip = spec.find("strip_accents");
  options.strip_accents = strip == spec.end() || strip->is_null() ? options.lowercase : strip->get<bool>();
  return options;
}

std::string BertNormalizer::normalize(std::string_view text) const {
  // Each step maps one character at a time, so clean_text and handle_chinese_chars share a
  // pass, and so do the mark filter and lowercasing after NFD.
  std::string cleaned;
  if (options_.clean_text || options_.handle_chinese_chars) {
    cleaned.reserve(text.size() + text.size() / 8);
    for (size_t pos = 0; pos < text.size();) {
      const char32_t c = utf8::next(text, pos);
      if (options_.clean_text && bert::is_dropped_control(c)) continue;
      if (options_.clean_text && bert::is_clean_white_space(c)) {
        cleaned += ' ';
      } else if (options_.handle_chinese_chars && bert::is_chinese_char(c)) {
        cleaned += ' ';
        utf8::append(cleaned, c);
        cleaned += ' ';
      } else {
        utf8::append(cleaned, c);
      }
    }
  } else {
    cleaned.assign(text);
  }
  if (!options_.strip_accents && !options_.lowercase) return cleaned;

  std::string decomposed;
  if (options_.strip_accents) bert::append_nfd(decomposed, cleaned);
  else decomposed.swap(cleaned);
  std::string out;
  out.reserve(decomposed.size());
  for (size_t pos = 0; pos < decomposed.size();) {
    const char32_t c = utf8::next(decomposed, pos);
    if (options_.strip_accents && bert::is_nonspacing_mark(c)) continue;
    if (options_.lowercase) bert::append_lowercase(out, c);
    else utf8::append(out, c);
  }
  return out;
}

}  // namespace xtrain::text

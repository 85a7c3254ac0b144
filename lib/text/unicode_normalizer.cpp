#include "text/unicode_normalizer.h"

#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include "text/bert_normalizer.h"

namespace xtrain::text {

UnicodeNormalizer::UnicodeNormalizer(const nlohmann::json& spec) {
  if (!spec.is_null()) add(spec);
}

UnicodeNormalizer::~UnicodeNormalizer() = default;

void UnicodeNormalizer::add(const nlohmann::json& spec) {
  const std::string type = spec.value("type", "");
  if (type == "Sequence") {
    for (const auto& part : spec.at("normalizers")) add(part);
    return;
  }
  if (type == "BertNormalizer" || type == "Lowercase") {
    steps_.push_back({nullptr, std::make_shared<const BertNormalizer>(BertNormalizer::options_from(spec))});
    return;
  }
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* form = nullptr;
  if (type == "NFC") form = icu::Normalizer2::getNFCInstance(status);
  else if (type == "NFD") form = icu::Normalizer2::getNFDInstance(status);
  else if (type == "NFKC") form = icu::Normalizer2::getNFKCInstance(status);
  else if (type == "NFKD") form = icu::Normalizer2::getNFKDInstance(status);
  else
    throw std::invalid_argument(fmt::format("unsupported normalizer type '{}' (supported: NFC, NFD, NFKC, NFKD, "
                                            "BertNormalizer, Lowercase, Sequence, or none)",
                                            type));
  if (U_FAILURE(status)) throw std::runtime_error(fmt::format("ICU {} normalizer: {}", type, u_errorName(status)));
  steps_.push_back({form, nullptr});
}

std::string UnicodeNormalizer::normalize(std::string_view text) const {
  std::string current(text);
  for (const Step& step : steps_) {
    if (step.bert) {
      current = step.bert->normalize(current);
      continue;
    }
    const icu::Normalizer2* form = step.form;
    UErrorCode status = U_ZERO_ERROR;
    const icu::StringPiece piece(current.data(), static_cast<int32_t>(current.size()));
    if (form->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) continue;
    status = U_ZERO_ERROR;
    std::string normalized;
    icu::StringByteSink<std::string> sink(&normalized, static_cast<int32_t>(current.size()));
    form->normalizeUTF8(0, piece, sink, nullptr, status);
    if (U_FAILURE(status)) throw std::runtime_error(fmt::format("ICU normalization failed: {}", u_errorName(status)));
    current.swap(normalized);
  }
  return current;
}

}  // namespace xtrain::text

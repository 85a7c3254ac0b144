#include "text/bert_char_class.h"

#include <memory>
#include <stdexcept>

#include <fmt/format.h>
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/uniset.h>

#include "text/utf8.h"

namespace xtrain::text::bert {

namespace {

// Whether `c` had been assigned by Unicode 8.0 (the versions go 7.0, 8.0, 9.0).
bool in_unicode_8(char32_t c) {
  UVersionInfo age;
  u_charAge(static_cast<UChar32>(c), age);
  return age[0] != 0 && age[0] <= 8;
}

uint32_t category_mask(char32_t c) { return U_MASK(u_charType(static_cast<UChar32>(c))); }

// A lowercase mapping that ICU 72 (Unicode 15) lacks: the case pairs Unicode 16 and 17 added.
struct CaseRange {
  char32_t first, last;
  char32_t lower_of_first;
};
constexpr CaseRange kNewCasePairs[] = {
    {0x1C89, 0x1C89, 0x1C8A},   {0xA7CB, 0xA7CB, 0x0264},   {0xA7CC, 0xA7CC, 0xA7CD},
    {0xA7CE, 0xA7CE, 0xA7CF},   {0xA7D2, 0xA7D2, 0xA7D3},   {0xA7D4, 0xA7D4, 0xA7D5},
    {0xA7DA, 0xA7DA, 0xA7DB},   {0xA7DC, 0xA7DC, 0x019B},   {0x10D50, 0x10D65, 0x10D70},
    {0x16EA0, 0x16EB8, 0x16EBB},
};

// NFD restricted to the characters of Unicode 9.0: ICU filters out the rest, which then pass
// through unchanged and, like a starter, are never reordered.
struct Nfd9 {
  icu::UnicodeSet assigned;
  std::unique_ptr<icu::FilteredNormalizer2> form;
  Nfd9() {
    UErrorCode status = U_ZERO_ERROR;
    assigned.applyPattern(icu::UnicodeString(u"[:age=9.0:]"), status);  // cumulative: every version up to 9.0
    assigned.freeze();
    const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(status);
    if (U_FAILURE(status)) throw std::runtime_error(fmt::format("ICU NFD normalizer: {}", u_errorName(status)));
    form = std::make_unique<icu::FilteredNormalizer2>(*nfd, assigned);
  }
};

}  // namespace

bool is_dropped_control(char32_t c) {
  if (c == 0 || c == 0xFFFD) return true;
  if (c == '\t' || c == '\n' || c == '\r') return false;
  const uint32_t mask = category_mask(c);
  if (mask & (U_GC_CC_MASK | U_GC_CO_MASK)) return true;
  return (mask & U_GC_CF_MASK) && in_unicode_8(c);
}

bool is_clean_white_space(char32_t c) { return utf8::is_white_space(c); }

bool is_chinese_char(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool is_punctuation(char32_t c) {
  if (c < 0x80) return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
  // Po in Unicode 8.0, since recategorised: SHARADA SANDHI MARK (now Mn), CANADIAN SYLLABICS
  // CHI SIGN (now So).
  if (c == 0x111C9 || c == 0x166D) return true;
  return (category_mask(c) & U_GC_P_MASK) && in_unicode_8(c);
}

bool is_nonspacing_mark(char32_t c) {
  // Recategorised since Unicode 8.0: HANUNOO SIGN PAMUDPOD was Mn (now Mc); MONGOLIAN LETTER
  // ALI GALI BALUDA and THREE BALUDA were Lo, JAVANESE CONSONANT SIGN KERET Mc and SHARADA
  // SANDHI MARK Po (all now Mn).
  if (c == 0x1734) return true;
  if (c == 0x1885 || c == 0x1886 || c == 0xA9BD || c == 0x111C9) return false;
  return (category_mask(c) & U_GC_MN_MASK) && in_unicode_8(c);
}

void append_lowercase(std::string& out, char32_t c) {
  if (c == 0x130) {  // the one unconditional multi-character lowercase mapping
    out += "i\xCC\x87";
    return;
  }
  for (const CaseRange& range : kNewCasePairs) {
    if (c >= range.first && c <= range.last) {
      utf8::append(out, range.lower_of_first + (c - range.first));
      return;
    }
  }
  utf8::append(out, static_cast<char32_t>(u_tolower(static_cast<UChar32>(c))));
}

void append_nfd(std::string& out, const std::string& text) {
  static const Nfd9 nfd;  // thread-safe initialisation; ICU normalizers are safe to share
  UErrorCode status = U_ZERO_ERROR;
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
  nfd.form->normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) throw std::runtime_error(fmt::format("ICU NFD normalization failed: {}", u_errorName(status)));
}

}  // namespace xtrain::text::bert

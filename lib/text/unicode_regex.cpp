#include "text/unicode_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>

namespace xtrain::text {

struct UnicodeRegex::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

namespace {

std::string pcre2_message(int error_code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(error_code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

// Length of the UTF-8 sequence that starts with `lead` (1 for a stray continuation byte).
size_t utf8_length(unsigned char lead) {
  if (lead >= 0xF0) return 4;
  if (lead >= 0xE0) return 3;
  if (lead >= 0xC0) return 2;
  return 1;
}

}  // namespace

UnicodeRegex::UnicodeRegex(const std::string& pattern, Options options) : compiled_(std::make_unique<Compiled>()) {
  // PCRE2_LITERAL admits neither UCP nor MULTILINE, which do not matter for a plain string.
  uint32_t flags = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF;
  if (options.literal) flags |= PCRE2_LITERAL;
  else flags |= PCRE2_UCP | (options.multiline ? PCRE2_MULTILINE : 0);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), flags, &error_code,
                                  &error_offset, nullptr);
  if (!compiled_->code)
    throw std::invalid_argument("regex error at offset " + std::to_string(error_offset) + ": " +
                                pcre2_message(error_code));
  // Without JIT (an unsupported CPU) the interpreter gives the same matches, only slower.
  pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);
}

UnicodeRegex::~UnicodeRegex() = default;
UnicodeRegex::UnicodeRegex(UnicodeRegex&&) noexcept = default;
UnicodeRegex& UnicodeRegex::operator=(UnicodeRegex&&) noexcept = default;

void UnicodeRegex::for_each_match(std::string_view text, const std::function<void(TextSpan)>& on_match) const {
  // Match data is per call so that one compiled pattern serves concurrent callers.
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(compiled_->code, nullptr), &pcre2_match_data_free);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    const int rc = pcre2_match(compiled_->code, subject, text.size(), start, 0, match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) throw std::runtime_error("regex match failed: " + pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
    on_match({ovector[0], ovector[1]});
    if (ovector[1] > ovector[0]) {
      start = ovector[1];
    } else {
      if (ovector[1] >= text.size()) break;
      start = ovector[1] + utf8_length(static_cast<unsigned char>(text[ovector[1]]));
    }
  }
}

}  // namespace xtrain::text

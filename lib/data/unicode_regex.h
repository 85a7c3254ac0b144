// UnicodeRegex: a compiled PCRE2 pattern over UTF-8 text, with Unicode properties (\p{L}),
// lookahead, possessive quantifiers and (?i:...) groups, JIT-compiled where the platform allows.
// This is the dialect of the pre-tokenizer patterns of tiktoken and Hugging Face tokenizers.
// \s follows PCRE2: Unicode White_Space plus U+180E. Invalid UTF-8 never matches; the bytes
// are left in the gaps between matches. Safe to use from several threads at once.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace xtrain::data {

struct TextSpan {
  size_t begin;
  size_t end;
};

class UnicodeRegex {
 public:
  struct Options {
    bool literal = false;    // the pattern is a plain string, not a regex
    bool multiline = false;  // ^ and $ also match at line breaks (Oniguruma's default)
  };
  // Throws std::invalid_argument naming the offset and PCRE2's reason when the pattern is bad.
  explicit UnicodeRegex(const std::string& pattern) : UnicodeRegex(pattern, Options{}) {}
  UnicodeRegex(const std::string& pattern, Options options);
  ~UnicodeRegex();
  UnicodeRegex(UnicodeRegex&&) noexcept;
  UnicodeRegex& operator=(UnicodeRegex&&) noexcept;

  // Successive non-overlapping leftmost matches. An empty match is reported, and the search
  // resumes one character after it.
  std::vector<TextSpan> find_all(std::string_view text) const;

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace xtrain::data

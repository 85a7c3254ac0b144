// UnicodeRegex: a compiled PCRE2 pattern over UTF-8 text, with Unicode properties (\p{L}),
// lookahead, possessive quantifiers and (?i:...) groups, JIT-compiled where the platform allows.
// This is the dialect of the pre-tokenizer patterns of tiktoken and Hugging Face tokenizers.
// \s follows PCRE2: Unicode White_Space plus U+180E. Invalid UTF-8 never matches; the bytes
// are left in the gaps between matches. Safe to use from several threads at once.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace xtrain::text {

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

  // Calls on_match for each successive non-overlapping leftmost match, in order. An empty
  // match is reported too, and the search resumes one character after it.
  void for_each_match(std::string_view text, const std::function<void(TextSpan)>& on_match) const;

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace xtrain::text

#include <catch2/catch.hpp>

#include "text/unicode_regex.h"

using xtrain::text::TextSpan;
using xtrain::text::UnicodeRegex;

namespace {

std::vector<std::string> matches(const UnicodeRegex& regex, const std::string& text) {
  std::vector<std::string> out;
  regex.for_each_match(text, [&](TextSpan span) { out.push_back(text.substr(span.begin, span.end - span.begin)); });
  return out;
}

}  // namespace

TEST_CASE("Unicode regex: GPT-2's pre-tokenizer pattern", "[data][tokenizer]") {
  const UnicodeRegex gpt2(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)");
  CHECK(matches(gpt2, "Hello world's   end\n\n") ==
        std::vector<std::string>{"Hello", " world", "'s", "  ", " end", "\n\n"});
  CHECK(matches(gpt2, "Größe 42€ 東京") == std::vector<std::string>{"Größe", " 42", "€", " 東京"});
}

TEST_CASE("Unicode regex: case-insensitive groups, empty matches, literals, line anchors", "[data][tokenizer]") {
  CHECK(matches(UnicodeRegex("(?i:'s|'ll)"), "IT'S WE'LL it's") == std::vector<std::string>{"'S", "'LL", "'s"});
  CHECK(matches(UnicodeRegex("x*"), "ab") == std::vector<std::string>{"", "", ""});
  UnicodeRegex::Options literal;
  literal.literal = true;
  CHECK(matches(UnicodeRegex("a.b", literal), "a.b axb") == std::vector<std::string>{"a.b"});
  UnicodeRegex::Options multiline;
  multiline.multiline = true;
  CHECK(matches(UnicodeRegex("a$", multiline), "xa\nya") == std::vector<std::string>{"a", "a"});
  CHECK_THROWS_AS(UnicodeRegex("(unclosed"), std::invalid_argument);
}

TEST_CASE("Unicode regex: invalid UTF-8 never matches", "[data][tokenizer]") {
  const UnicodeRegex letters(R"(\p{L}+)");
  CHECK(matches(letters, "ab\xFF\xFE" "cd") == std::vector<std::string>{"ab", "cd"});
}

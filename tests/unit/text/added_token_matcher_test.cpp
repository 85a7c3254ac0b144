#include <catch2/catch.hpp>

#include "text/added_token_matcher.h"

using xtrain::text::AddedToken;
using xtrain::text::AddedTokenMatcher;

namespace {

// Segments as "text" or "[id]".
std::vector<std::string> split(const AddedTokenMatcher& matcher, const std::string& text) {
  std::vector<std::string> out;
  for (const auto& s : matcher.split(text))
    out.push_back(s.id >= 0 ? "[" + std::to_string(s.id) + "]" : text.substr(s.begin, s.end - s.begin));
  return out;
}

}  // namespace

TEST_CASE("added tokens: leftmost-longest matches", "[data][tokenizer]") {
  const AddedTokenMatcher matcher({{"<|a|>", 1}, {"<|a|><|b|>", 2}, {"<|b|>", 3}});
  CHECK(split(matcher, "x<|a|><|b|>y<|b|><|a|>") == std::vector<std::string>{"x", "[2]", "y", "[3]", "[1]"});
  CHECK(split(matcher, "<|a") == std::vector<std::string>{"<|a"});
  CHECK(split(matcher, "") == std::vector<std::string>{});
  CHECK(AddedTokenMatcher({}).empty());
}

TEST_CASE("added tokens: lstrip and rstrip take the white space beside them", "[data][tokenizer]") {
  AddedToken mask{"<mask>", 7};
  mask.lstrip = mask.rstrip = true;
  const AddedTokenMatcher matcher({mask});
  CHECK(split(matcher, "a  <mask> \u3000b") == std::vector<std::string>{"a", "[7]", "b"});
  CHECK(split(matcher, "<mask> <mask>") == std::vector<std::string>{"[7]", "[7]"});
}

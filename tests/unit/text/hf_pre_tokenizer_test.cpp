#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "text/hf_pre_tokenizer.h"

using nlohmann::json;
using xtrain::text::HfPreTokenizer;

namespace {

std::vector<std::string> pieces(const json& spec, const std::string& text) {
  std::vector<std::string> out;
  HfPreTokenizer(spec).split(text, [&](std::string_view piece) { out.emplace_back(piece); });
  return out;
}

json split_then_bytes(const std::string& behavior, bool invert = false) {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", invert}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
}

}  // namespace

TEST_CASE("HF pre-tokenizer: Split behaviors", "[data][tokenizer]") {
  // The examples of Hugging Face's SplitDelimiterBehavior documentation.
  const std::string text = "the-final--countdown";
  using V = std::vector<std::string>;
  CHECK(pieces(split_then_bytes("Removed"), text) == V{"the", "final", "countdown"});
  CHECK(pieces(split_then_bytes("Isolated"), text) == V{"the", "-", "final", "-", "-", "countdown"});
  CHECK(pieces(split_then_bytes("MergedWithPrevious"), text) == V{"the-", "final-", "-", "countdown"});
  CHECK(pieces(split_then_bytes("MergedWithNext"), text) == V{"the", "-final", "-", "-countdown"});
  CHECK(pieces(split_then_bytes("Contiguous"), text) == V{"the", "-", "final", "--", "countdown"});
  CHECK(pieces(split_then_bytes("Removed", true), text) == V{"-", "-", "-"});
}

TEST_CASE("HF pre-tokenizer: ByteLevel and Digits", "[data][tokenizer]") {
  using V = std::vector<std::string>;
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  CHECK(pieces(byte_level, "Hello  world") == V{" Hello", " ", " world"});
  CHECK(pieces(byte_level, " x") == V{" x"});
  const json digits = {{"type", "Sequence"},
                       {"pretokenizers",
                        {{{"type", "Digits"}, {"individual_digits", false}},
                         {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  CHECK(pieces(digits, "ab123c4") == V{"ab", "123", "c", "4"});
}

TEST_CASE("HF pre-tokenizer: unsupported shapes are explained", "[data][tokenizer]") {
  CHECK_THROWS_WITH(HfPreTokenizer(json{{"type", "Metaspace"}}),
                    Catch::Contains("not ByteLevel: only byte-level BPE files are supported"));
  CHECK_THROWS_WITH(HfPreTokenizer(json(nullptr)), Catch::Contains("no pre_tokenizer"));
  const json late = {{"type", "Sequence"},
                     {"pretokenizers", {{{"type", "ByteLevel"}}, {{"type", "Digits"}}}}};
  CHECK_THROWS_WITH(HfPreTokenizer(late), Catch::Contains("ByteLevel must be the last"));
  const json bad_regex = {{"type", "Sequence"},
                          {"pretokenizers",
                           {{{"type", "Split"}, {"pattern", {{"Regex", "(x"}}}, {"behavior", "Isolated"}},
                            {{"type", "ByteLevel"}}}}};
  CHECK_THROWS_WITH(HfPreTokenizer(bad_regex), Catch::Contains("Split pattern `(x`"));
}

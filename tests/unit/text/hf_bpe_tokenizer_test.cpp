#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "scratch_dir.h"
#include "text/byte_level_alphabet.h"
#include "text/tokenizer.h"
#include "util/input_error.h"

using nlohmann::json;
using xtrain::InputError;
using xtrain::text::byte_level_char;
using xtrain::text::make_tokenizer;
using xtrain::testing::ScratchDir;

namespace {

// A byte-level BPE: the 256 byte symbols (ids 0..255 in byte order), merges for " the",
// <|endoftext|> (special) and "hello world" (a normalized, non-special added token).
json toy_tokenizer(bool string_merges = false) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level_char(static_cast<unsigned char>(b))] = b;
  const std::string space = byte_level_char(' ');
  vocab[space + "t"] = 256;
  vocab["he"] = 257;
  vocab[space + "the"] = 258;
  json merges = json::array();
  for (auto [l, r] : std::vector<std::pair<std::string, std::string>>{{space, "t"}, {"h", "e"}, {space + "t", "he"}})
    merges.push_back(string_merges ? json(l + " " + r) : json::array({l, r}));
  return {{"version", "1.0"},
          {"added_tokens",
           {{{"id", 259}, {"content", "<|endoftext|>"}, {"special", true}, {"normalized", false}},
            {{"id", 260}, {"content", "hello world"}, {"special", false}, {"normalized", true}}}},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
          {"post_processor", {{"type", "ByteLevel"}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
}

}  // namespace

TEST_CASE("HF tokenizer.json: merges, added tokens, decode", "[data][tokenizer]") {
  ScratchDir dir;
  for (bool string_merges : {false, true}) {
    const std::string path = dir.write("tokenizer.json", toy_tokenizer(string_merges).dump());
    const auto tokenizer = make_tokenizer("hf:" + path);
    CHECK(tokenizer->vocab_size() == 261);
    CHECK(tokenizer->eos_id() == 259);
    const std::vector<int64_t> ids = tokenizer->encode(" the<|endoftext|>the hello world!");
    CHECK(ids == std::vector<int64_t>{258, 259, 't', 257, ' ', 260, '!'});
    CHECK(tokenizer->decode(ids) == " thethe hello world!");  // the special token is skipped
    CHECK(tokenizer->decode({-1, 9999, 'x'}) == "x");
  }
  // A folder holding tokenizer.json is accepted too.
  CHECK(make_tokenizer("hf:" + dir.path().string())->eos_id() == 259);
}

TEST_CASE("HF tokenizer.json: an id beyond 2^24 is bad input, not a huge table", "[data][tokenizer]") {
  ScratchDir dir;
  json tokenizer = toy_tokenizer();
  tokenizer["model"]["vocab"]["far"] = int64_t{1} << 40;
  CHECK_THROWS_WITH(make_tokenizer("hf:" + dir.write("vocab.json", tokenizer.dump())),
                    Catch::EndsWith("vocab.json: model: vocab id 1099511627776 of 'far' is outside 0-16777215"));
  tokenizer = toy_tokenizer();
  tokenizer["added_tokens"][0]["id"] = 1 << 24;
  CHECK_THROWS_WITH(make_tokenizer("hf:" + dir.write("added.json", tokenizer.dump())),
                    Catch::EndsWith("added.json: added_tokens: '<|endoftext|>' has id 16777216, outside 0-16777215"));
}

TEST_CASE("HF tokenizer.json: end-of-text from tokenizer_config.json", "[data][tokenizer]") {
  ScratchDir dir;
  json file = toy_tokenizer();
  file["added_tokens"].push_back({{"id", 261}, {"content", "</s>"}, {"special", true}, {"normalized", false}});
  const std::string path = dir.write("tokenizer.json", file.dump());
  CHECK(make_tokenizer("hf:" + path)->eos_id() == 259);
  dir.write("tokenizer_config.json", R"({"eos_token": {"content": "</s>"}})");
  CHECK(make_tokenizer("hf:" + path)->eos_id() == 261);
  dir.write("tokenizer_config.json", R"({"eos_token": "<|nope|>"})");
  CHECK_THROWS_WITH(make_tokenizer("hf:" + path), Catch::Contains("eos_token '<|nope|>' of tokenizer_config.json"));
}

TEST_CASE("HF tokenizer.json: NFC normalizer", "[data][tokenizer]") {
  ScratchDir dir;
  json file = toy_tokenizer();
  file["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}}}};
  const auto tokenizer = make_tokenizer("hf:" + dir.write("tokenizer.json", file.dump()));
  CHECK(tokenizer->encode("cafe\xCC\x81") == tokenizer->encode("caf\xC3\xA9"));
}

TEST_CASE("HF tokenizer.json: malformed or unsupported files are bad input", "[data][tokenizer]") {
  ScratchDir dir;
  auto problem = [&](const json& file) {
    return xtrain::text::check_tokenizer_spec("hf:" + dir.write("tokenizer.json", file.dump())).value_or("");
  };
  CHECK_THAT(xtrain::text::check_tokenizer_spec("hf:" + dir.write("broken.json", "{\"model\": ")).value_or(""),
             Catch::Contains("broken.json: not valid JSON"));
  json file = toy_tokenizer();
  file["model"]["type"] = "Unigram";
  CHECK_THAT(problem(file), Catch::Contains("tokenizer.json: model: type is Unigram, but only BPE and WordPiece"));
  file = toy_tokenizer();
  file["model"]["merges"].push_back({"x", "nothere"});
  CHECK_THAT(problem(file), Catch::Contains("uses or makes a token missing from the vocab"));
  file = toy_tokenizer();
  file["normalizer"] = {{"type", "Replace"}};
  CHECK_THAT(problem(file), Catch::Contains("normalizer: unsupported normalizer type 'Replace'"));
  file = toy_tokenizer();
  file["pre_tokenizer"] = {{"type", "Whitespace"}};
  CHECK_THAT(problem(file), Catch::Contains("pre_tokenizer: the last pre_tokenizer is Whitespace"));
  file = toy_tokenizer();
  file["added_tokens"][0]["content"] = "<|other|>";
  CHECK_THAT(problem(file), Catch::Contains("none of <|endoftext|>"));
  file = toy_tokenizer();
  file["model"]["vocab"] = "not an object";
  CHECK_THAT(problem(file), Catch::Contains("tokenizer.json: model:"));
  CHECK_THROWS_AS(make_tokenizer("hf:" + dir.path().string() + "/missing.json"), InputError);
}

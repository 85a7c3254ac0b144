#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "scratch_dir.h"
#include "text/tiktoken_tokenizer.h"
#include "text/tokenizer.h"
#include "util/input_error.h"

using xtrain::InputError;
using xtrain::text::make_tokenizer;
using xtrain::testing::ScratchDir;

namespace {

std::string base64(const std::string& bytes) {
  static const char* const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t chunk = 0;
    for (size_t k = 0; k < 3; ++k) chunk = (chunk << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? alphabet[(chunk >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

// A gpt2-style rank file: the 256 bytes, then a few merges.
std::string rank_file(const std::vector<std::string>& merges) {
  std::string text;
  int rank = 0;
  for (int b = 0; b < 256; ++b) text += base64(std::string(1, static_cast<char>(b))) + " " + std::to_string(rank++) + "\n";
  for (const auto& token : merges) text += base64(token) + " " + std::to_string(rank++) + "\n";
  return text;
}

}  // namespace

TEST_CASE("the base64 encoder of these tests is standard base64", "[data][tokenizer]") {
  CHECK(base64("a") == "YQ==");
  CHECK(base64("ab") == "YWI=");
  CHECK(base64("abc") == "YWJj");
  CHECK(base64(" the") == "IHRoZQ==");
}

TEST_CASE("tiktoken tokenizer: merges, specials, round trip", "[data][tokenizer]") {
  ScratchDir dir;
  const std::string path = dir.write("gpt2.tiktoken", rank_file({" t", "he", " the", "in", "ing"}));
  const auto tokenizer = make_tokenizer("tiktoken:" + path);
  CHECK(tokenizer->name() == "tiktoken:" + path + ":gpt2");
  CHECK(tokenizer->vocab_size() == 50257);  // <|endoftext|> is 50256
  CHECK(tokenizer->eos_id() == 50256);
  // " the" is a token; " thing" merges " t" (256), then "in" (259), then "ing" (260).
  CHECK(tokenizer->encode(" the thing") == std::vector<int64_t>{258, 256, 'h', 260});
  // Special-token text in a document is ordinary text.
  CHECK(tokenizer->encode("<|endoftext|>").size() > 1);
  CHECK(tokenizer->decode({258, 50256, 256}) == " the t");

  std::mt19937 rng(1);
  std::string bytes(5000, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  CHECK(tokenizer->decode(tokenizer->encode(bytes)) == bytes);  // invalid UTF-8 included
}

TEST_CASE("tiktoken tokenizer: the encoding comes from the name or the spec", "[data][tokenizer]") {
  ScratchDir dir;
  const std::string file = rank_file({});
  const std::string named = dir.write("ranks.txt", file);
  CHECK(make_tokenizer("tiktoken:" + named + ":cl100k_base")->eos_id() == 100257);
  CHECK(make_tokenizer("tiktoken:" + named + ":o200k_base")->vocab_size() == 200019);
  CHECK_THROWS_WITH(make_tokenizer("tiktoken:" + named),
                    Catch::Contains("cannot tell the encoding of tiktoken rank file") &&
                        Catch::Contains("tiktoken:" + named + ":cl100k_base"));
  CHECK_THROWS_WITH(make_tokenizer("tiktoken:" + named + ":cl100k"),
                    Catch::Contains("unknown tiktoken encoding 'cl100k' (known: gpt2, r50k_base"));
  CHECK(xtrain::text::TiktokenTokenizer::encoding_from_file_name("/x/o200k_base.tiktoken") == "o200k_base");
}

TEST_CASE("tiktoken tokenizer: malformed rank files are bad input", "[data][tokenizer]") {
  ScratchDir dir;
  CHECK_THROWS_AS(make_tokenizer("tiktoken:" + dir.path().string() + "/missing.tiktoken:gpt2"), InputError);
  const std::string bad_line = dir.write("gpt2.tiktoken", rank_file({}) + "not-base64! 300\n");
  CHECK_THROWS_WITH(make_tokenizer("tiktoken:" + bad_line), Catch::Contains("gpt2.tiktoken:257: not a tiktoken rank line"));
  const std::string no_bytes = dir.write("r50k_base.tiktoken", base64("ab") + " 0\n");
  CHECK_THROWS_WITH(make_tokenizer("tiktoken:" + no_bytes), Catch::Contains("is not a byte-level BPE rank file"));
  std::string clash = rank_file({});
  for (int r = 256; r <= 50256; ++r) clash += base64("x" + std::to_string(r)) + " " + std::to_string(r) + "\n";
  const std::string clashing = dir.write("p50k_base.tiktoken", clash);
  CHECK_THROWS_WITH(make_tokenizer("tiktoken:" + clashing), Catch::Contains("rank 50256 is an ordinary token"));
  CHECK(xtrain::text::check_tokenizer_spec("tiktoken:" + clashing).has_value());
}

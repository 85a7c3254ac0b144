#include <catch2/catch.hpp>

#include "text/tokenizer.h"
#include "util/input_error.h"

using xtrain::text::make_tokenizer;

TEST_CASE("byte tokenizer round-trips ASCII and multi-byte UTF-8", "[data]") {
  const auto tokenizer = make_tokenizer("byte");
  const std::string text = "Hello, w\xC3\xB6rld! \xE2\x82\xAC \xF0\x9F\x98\x80\n";  // ö, €, 😀
  const std::vector<int64_t> ids = tokenizer->encode(text);
  REQUIRE(ids.size() == text.size());
  CHECK(ids[0] == 'H');
  CHECK(ids[8] == 0xC3);  // high bytes map to 128..255, never negative
  CHECK(tokenizer->decode(ids) == text);
}

TEST_CASE("byte tokenizer ids, eos and vocabulary", "[data]") {
  const auto tokenizer = make_tokenizer("byte");
  CHECK(tokenizer->name() == "byte");
  CHECK(tokenizer->vocab_size() == 257);
  CHECK(tokenizer->eos_id() == 256);
  CHECK(tokenizer->encode("") == std::vector<int64_t>{});
  CHECK(tokenizer->encode(std::string("\0\xFF", 2)) == std::vector<int64_t>{0, 255});
}

TEST_CASE("byte tokenizer decode drops eos and out-of-range ids", "[data]") {
  const auto tokenizer = make_tokenizer("byte");
  CHECK(tokenizer->decode({'a', 256, 'b', 300, -1, 'c'}) == "abc");
}

TEST_CASE("byte tokenizer decode passes invalid UTF-8 through", "[data]") {
  const auto tokenizer = make_tokenizer("byte");
  // A lone lead byte and a stray continuation byte, as a sampled model may produce.
  CHECK(tokenizer->decode({'x', 0xE2, 0x82, 'y', 0x80}) == "x\xE2\x82y\x80");
}

TEST_CASE("tokenizer specs are validated", "[data]") {
  CHECK_FALSE(xtrain::text::check_tokenizer_spec("byte").has_value());
  const std::string expected =
      "unknown tokenizer 'bpe' (expected: byte, sentencepiece:PATH, tiktoken:PATH[:ENCODING] or hf:PATH to a "
      "tokenizer.json)";
  CHECK(xtrain::text::check_tokenizer_spec("bpe") == expected);
  CHECK_THROWS_AS(make_tokenizer("bpe"), xtrain::InputError);
  CHECK_THROWS_WITH(make_tokenizer("bpe"), expected);
  CHECK(xtrain::text::check_tokenizer_spec("hf:").has_value());
}

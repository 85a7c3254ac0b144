#include <catch2/catch.hpp>

#include <cstdlib>

#include <fmt/format.h>

#include "scratch_dir.h"
#include "text/tokenizer.h"
#include "util/input_error.h"

using xtrain::InputError;
using xtrain::text::make_tokenizer;
using xtrain::testing::ScratchDir;

TEST_CASE("SentencePiece: unreadable or foreign files are bad input", "[data][tokenizer]") {
  ScratchDir dir;
  CHECK_THROWS_AS(make_tokenizer("sentencepiece:" + dir.path().string() + "/missing.model"), InputError);
  const std::string junk = dir.write("junk.model", "this is not a protobuf");
  CHECK_THROWS_WITH(make_tokenizer("sentencepiece:" + junk), Catch::Contains("junk.model: not a SentencePiece model"));
}

TEST_CASE("SentencePiece: a damaged model that loads but cannot encode is refused when loaded", "[data][tokenizer]") {
  // Found by tests/fuzz/sentencepiece.cpp: libsentencepiece accepts this file, then fails on any text.
  const std::string damaged = std::string(XTRAIN_SOURCE_DIR) + "/tests/fuzz/regressions/sentencepiece/encode-fails-after-load";
  CHECK_THROWS_WITH(make_tokenizer("sentencepiece:" + damaged),
                    Catch::Contains("encode-fails-after-load: the SentencePiece model cannot encode text (") &&
                        Catch::Contains("the file is damaged: use the .model file that came with the model"));
}

TEST_CASE("SentencePiece: a model that makes libsentencepiece throw is bad input", "[data][tokenizer]") {
  // Found by tests/fuzz/sentencepiece.cpp: the trie builder throws on a zero-length piece.
  const std::string damaged = std::string(XTRAIN_SOURCE_DIR) + "/tests/fuzz/regressions/sentencepiece/trie-builder-throws";
  CHECK_THROWS_WITH(make_tokenizer("sentencepiece:" + damaged),
                    Catch::Contains("trie-builder-throws: not a SentencePiece model (libsentencepiece threw: ") &&
                        Catch::Contains("zero-length key"));
}

TEST_CASE("SentencePiece: a trained model encodes, decodes and ends documents with </s>", "[data][tokenizer]") {
  ScratchDir dir;
  std::string corpus;
  for (int i = 0; i < 200; ++i)
    corpus += fmt::format("Line {} of a small corpus: tokenizers split text into pieces, Größe {}.\n", i, i * 7);
  const std::string text = dir.write("corpus.txt", corpus);
  const std::string prefix = (dir.path() / "small").string();
  const std::string command = fmt::format(
      "{} -c 'import sys, sentencepiece as s; s.SentencePieceTrainer.train(input=sys.argv[1], "
      "model_prefix=sys.argv[2], vocab_size=120, hard_vocab_limit=False, minloglevel=2)' {} {}",
      XTRAIN_PYTHON, text, prefix);
  // The trainer is part of the pinned Python environment (scripts/setup-deps.sh): without it the
  // test fails rather than passing unchecked.
  INFO("training with " << XTRAIN_PYTHON << "'s sentencepiece");
  REQUIRE(std::system(command.c_str()) == 0);
  const auto tokenizer = make_tokenizer("sentencepiece:" + prefix + ".model");
  CHECK(tokenizer->vocab_size() == 120);
  CHECK(tokenizer->eos_id() == 2);  // SentencePiece's default: 0 <unk>, 1 <s>, 2 </s>
  const std::string sample = "tokenizers split Größe 42";
  const std::vector<int64_t> ids = tokenizer->encode(sample);
  CHECK_FALSE(ids.empty());
  CHECK(ids.front() != 1);  // no <s> added
  CHECK(tokenizer->decode(ids) == sample);
  std::vector<int64_t> with_control = ids;
  with_control.push_back(2);
  with_control.push_back(100000);
  CHECK(tokenizer->decode(with_control) == sample);
}

#include <catch2/catch.hpp>

#include <cstdlib>

#include <fmt/format.h>

#include "data/tokenizer.h"
#include "scratch_dir.h"
#include "util/input_error.h"

using xtrain::InputError;
using xtrain::data::make_tokenizer;
using xtrain::testing::ScratchDir;

TEST_CASE("SentencePiece: unreadable or foreign files are bad input", "[data][tokenizer]") {
  ScratchDir dir;
  CHECK_THROWS_AS(make_tokenizer("sentencepiece:" + dir.path().string() + "/missing.model"), InputError);
  const std::string junk = dir.write("junk.model", "this is not a protobuf");
  CHECK_THROWS_WITH(make_tokenizer("sentencepiece:" + junk), Catch::Contains("junk.model: not a SentencePiece model"));
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

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "scratch_dir.h"
#include "text/tokenizer.h"
#include "text/wordpiece_tokenizer.h"
#include "util/input_error.h"

using nlohmann::json;
using xtrain::InputError;
using xtrain::text::make_tokenizer;
using xtrain::text::WordPieceTokenizer;
using xtrain::testing::ScratchDir;
using Ids = std::vector<int64_t>;

namespace {

// A BERT-uncased-style file: BertNormalizer (lowercase, accents stripped), BertPreTokenizer,
// a WordPiece vocabulary of 23 tokens, [CLS] $A [SEP] and the WordPiece decoder.
json toy_bert(bool uncased = true) {
  const std::vector<std::string> tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able",
                                           "##a", "a", "cafe", "!", ",", "\xE4\xB8\xAD" /* 中 */,
                                           "\xE6\x96\x87" /* 文 */, "hello", "x", "##x", "the", ".",
                                           "\xE2\x80\x94" /* — */, "\xE2\x80\x9C" /* “ */, "\xE2\x80\x9D" /* ” */};
  json vocab = json::object();
  for (size_t id = 0; id < tokens.size(); ++id) vocab[tokens[id]] = id;
  json added = json::array();
  for (int id = 0; id < 5; ++id)
    added.push_back({{"id", id}, {"content", tokens[static_cast<size_t>(id)]}, {"single_word", false},
                     {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", true}});
  auto special = [](const char* name, int id) { return json{{"id", name}, {"ids", {id}}, {"tokens", {name}}}; };
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer",
           {{"type", "BertNormalizer"}, {"clean_text", true}, {"handle_chinese_chars", true},
            {"strip_accents", nullptr}, {"lowercase", uncased}}},
          {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single",
             {{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}},
              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
              {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 0}}}}}},
            {"special_tokens", {{"[CLS]", special("[CLS]", 2)}, {"[SEP]", special("[SEP]", 3)}}}}},
          {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
          {"model",
           {{"type", "WordPiece"},
            {"unk_token", "[UNK]"},
            {"continuing_subword_prefix", "##"},
            {"max_input_chars_per_word", 100},
            {"vocab", vocab}}}};
}

std::unique_ptr<WordPieceTokenizer> load(const ScratchDir& dir, const json& file) {
  return std::make_unique<WordPieceTokenizer>(dir.write("tokenizer.json", file.dump()));
}

}  // namespace

TEST_CASE("WordPiece: greedy longest match, unknown words, long words", "[data][tokenizer][wordpiece]") {
  ScratchDir dir;
  const auto tokenizer = load(dir, toy_bert());
  // ##aff is taken over the shorter ##a.
  CHECK(tokenizer->encode("unaffable") == Ids{5, 6, 7});
  CHECK(tokenizer->encode("unaff a") == Ids{5, 6, 9});
  // One piece without a token makes the whole word [UNK], not just that piece.
  CHECK(tokenizer->encode("unaffablez hello") == Ids{1, 15});
  // 100 characters are a word; 101 are [UNK].
  Ids hundred = {16};
  hundred.insert(hundred.end(), 99, 17);
  CHECK(tokenizer->encode(std::string(100, 'x')) == hundred);
  CHECK(tokenizer->encode(std::string(101, 'x') + " x") == Ids{1, 16});
}

TEST_CASE("WordPiece: BertNormalizer and BertPreTokenizer", "[data][tokenizer][wordpiece]") {
  ScratchDir dir;
  const auto tokenizer = load(dir, toy_bert());
  // CJK ideographs are words of their own, even inside a word.
  CHECK(tokenizer->encode("\xE4\xB8\xAD\xE6\x96\x87") == Ids{13, 14});
  CHECK(tokenizer->encode("hello\xE4\xB8\xAD" "x") == Ids{15, 13, 16});
  // Lowercased, accents stripped, precomposed or not.
  CHECK(tokenizer->encode("Caf\xC3\xA9 CAF\xC3\x89 cafe\xCC\x81") == Ids{10, 10, 10});
  // Each punctuation character is its own word, Unicode quotes and dashes too.
  CHECK(tokenizer->encode("hello,the!") == Ids{15, 12, 18, 11});
  CHECK(tokenizer->encode("\xE2\x80\x9Chello\xE2\x80\x9D\xE2\x80\x94the.") == Ids{21, 15, 22, 20, 18, 19});
  // Control characters go; tabs and newlines separate words.
  CHECK(tokenizer->encode("hel\x01lo\tthe\r\nx") == Ids{15, 18, 16});

  // Cased: no lowercasing, and strip_accents (null) follows lowercase.
  const auto cased = load(dir, toy_bert(false));
  CHECK(cased->encode("Caf\xC3\xA9 cafe hello") == Ids{1, 10, 15});
}

TEST_CASE("WordPiece: special tokens, template, decode", "[data][tokenizer][wordpiece]") {
  ScratchDir dir;
  const std::string path = dir.write("tokenizer.json", toy_bert().dump());
  const auto tokenizer = make_tokenizer("hf:" + dir.path().string());  // a folder works too
  CHECK(tokenizer->vocab_size() == 23);
  CHECK(tokenizer->eos_id() == 3);
  // Added tokens are found in the raw text, before lowercasing; encode() adds no [CLS]/[SEP].
  CHECK(tokenizer->encode("[CLS] hello[MASK]. [SEP]") == Ids{2, 15, 4, 19, 3});
  CHECK(tokenizer->encode("[mask]") == Ids{1, 1, 1});

  const auto& wordpiece = dynamic_cast<const WordPieceTokenizer&>(*tokenizer);
  CHECK(wordpiece.with_special_tokens({15, 18}) == Ids{2, 15, 18, 3});
  CHECK(wordpiece.token_id("[MASK]") == 4);
  CHECK(wordpiece.token_id("[PAD]") == 0);
  CHECK_FALSE(wordpiece.token_id("nope").has_value());

  // Special tokens are skipped, ## pieces glued, and no space is left before punctuation.
  CHECK(tokenizer->decode({2, 5, 6, 7, 12, 18, 4, 15, 11, 3}) == "unaffable, the hello!");
  CHECK(tokenizer->decode({7, 15, -1, 99, 17}) == "##able hellox");

  // BertProcessing frames the same way.
  json file = toy_bert();
  file["post_processor"] = {{"type", "BertProcessing"}, {"sep", {"[SEP]", 3}}, {"cls", {"[CLS]", 2}}};
  CHECK(load(dir, file)->with_special_tokens({9}) == Ids{2, 9, 3});
}

TEST_CASE("WordPiece: unsupported or malformed files are bad input", "[data][tokenizer][wordpiece]") {
  ScratchDir dir;
  auto problem = [&](const json& file) {
    try {
      make_tokenizer("hf:" + dir.write("tokenizer.json", file.dump()));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  json file = toy_bert();
  file["normalizer"] = {{"type", "Precompiled"}};
  CHECK_THAT(problem(file), Catch::Contains("tokenizer.json: normalizer: unsupported normalizer type 'Precompiled'"));
  file = toy_bert();
  file["pre_tokenizer"] = {{"type", "Metaspace"}};
  CHECK_THAT(problem(file), Catch::Contains("tokenizer.json: pre_tokenizer: unsupported pre_tokenizer type 'Metaspace'"));
  file = toy_bert();
  file["model"]["unk_token"] = "<unk>";
  CHECK_THAT(problem(file), Catch::Contains("tokenizer.json: model: unk_token '<unk>' is not in the vocab"));
  file = toy_bert();
  file["decoder"] = {{"type", "ByteLevel"}};
  CHECK_THAT(problem(file), Catch::Contains("tokenizer.json: decoder: unsupported decoder type 'ByteLevel'"));
  file = toy_bert();
  file["model"]["vocab"]["far"] = int64_t{1} << 40;
  CHECK_THAT(problem(file), Catch::Contains("model: the id of 'far' in the vocab is 1099511627776, outside"));
}

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "data/document_encoder.h"
#include "scratch_dir.h"
#include "text/byte_level_alphabet.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"
#include "util/input_error.h"

using namespace xtrain::data;
using namespace xtrain::text;
using xtrain::InputError;
using xtrain::testing::ScratchDir;

namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "Be brief."},
    {"user", "Hi!"},
    {"assistant", "Hello."},
    {"user", "2+2?"},
    {"assistant", "4"},
};

// The encoded conversation as text, the tokens that carry loss between « and »; the byte
// tokenizer makes every token one character, so this shows exactly which tokens are targets.
std::string with_loss_marked(const EncodedDocument& encoded, const Tokenizer& tokenizer) {
  std::string text;
  bool in_loss = false;
  for (size_t i = 0; i < encoded.tokens.size(); ++i) {
    const bool loss = encoded.loss_mask.at(i) != 0;
    if (loss != in_loss) text += loss ? "«" : "»";
    in_loss = loss;
    const int64_t token = encoded.tokens[i];
    text += token == tokenizer.eos_id() ? "<eos>" : tokenizer.decode({token});
  }
  return text + (in_loss ? "»" : "");
}

// One line per token: id, loss or not, and the token's text: printed when a check fails.
std::string token_table(const EncodedDocument& encoded, const Tokenizer& tokenizer) {
  std::string table = "token | loss | text\n";
  for (size_t i = 0; i < encoded.tokens.size(); ++i) {
    std::string piece = tokenizer.decode({encoded.tokens[i]});
    if (piece == "\n") piece = "\\n";
    table += std::to_string(encoded.tokens[i]) + " | " + (encoded.loss_mask.at(i) ? "loss" : "-") + " | " + piece + "\n";
  }
  return table;
}

EncodedDocument encode(const std::string& template_spec, const Tokenizer& tokenizer,
                       const std::vector<ChatMessage>& messages = kConversation) {
  const DocumentEncoder encoder(tokenizer, ChatTemplate::parse(template_spec));
  return encoder.encode({"", messages, true, {}});
}

}  // namespace

TEST_CASE("chat: the loss is on the assistant's contents and end-of-turn markers only (chatml)", "[data][chat]") {
  const auto tokenizer = make_tokenizer("byte");
  const EncodedDocument encoded = encode("chatml", *tokenizer);
  INFO(token_table(encoded, *tokenizer));
  REQUIRE(encoded.loss_mask.size() == encoded.tokens.size());
  CHECK(with_loss_marked(encoded, *tokenizer) ==
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHi!<|im_end|>\n"
        "<|im_start|>assistant\n«Hello.<|im_end|>»\n"
        "<|im_start|>user\n2+2?<|im_end|>\n"
        "<|im_start|>assistant\n«4<|im_end|>»\n"
        "<eos>");
}

TEST_CASE("chat: llama3 writes the begin token once and trims contents", "[data][chat]") {
  const auto tokenizer = make_tokenizer("byte");
  const EncodedDocument encoded =
      encode("llama3", *tokenizer, {{"user", "  Hi \n"}, {"assistant", " Hello. "}, {"user", "Bye"}});
  INFO(token_table(encoded, *tokenizer));
  CHECK(with_loss_marked(encoded, *tokenizer) ==
        "<|begin_of_text|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n«Hello.<|eot_id|>»"
        "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
        "<eos>");
}

TEST_CASE("chat: a custom template of per-role prefixes and suffixes", "[data][chat]") {
  const auto tokenizer = make_tokenizer("byte");
  const std::string spec = "begin=<s>;user=[U] {content}\\n;assistant=[A] {content} </a>\\n\\n;*=({role}) {content};;\\n";
  const EncodedDocument encoded =
      encode(spec, *tokenizer, {{"user", "q"}, {"assistant", "a"}, {"tool", "t"}, {"assistant", "b"}});
  INFO(token_table(encoded, *tokenizer));
  CHECK(with_loss_marked(encoded, *tokenizer) == "<s>[U] q\n[A] «a </a>»\n\n(tool) t;\n[A] «b </a>»\n\n<eos>");
}

TEST_CASE("chat: malformed templates and unknown roles are input errors", "[data][chat]") {
  CHECK(check_chat_template("chatml") == std::nullopt);
  CHECK(check_chat_template("llama3") == std::nullopt);
  CHECK_THAT(check_chat_template("vicuna").value_or(""), Catch::StartsWith("unknown chat template 'vicuna'"));
  CHECK_THAT(check_chat_template("user=<u>").value_or(""), Catch::Contains("must contain {content} exactly once"));
  CHECK_THAT(check_chat_template("user={content}{content}").value_or(""), Catch::Contains("exactly once"));
  CHECK_THAT(check_chat_template("=x{content}").value_or(""), Catch::Contains("has no NAME="));
  CHECK_THAT(check_chat_template("user={content};user={content}").value_or(""), Catch::Contains("given twice"));
  CHECK_THAT(check_chat_template("begin=<s>").value_or(""), Catch::Contains("defines no role"));

  const auto tokenizer = make_tokenizer("byte");
  CHECK_THROWS_WITH(encode("user={content};assistant={content}", *tokenizer, {{"tool", "x"}}),
                    Catch::StartsWith("role 'tool' has no entry in the chat template (it has: user, assistant)"));
}

TEST_CASE("chat: with a tokenizer that knows the markers, each is one token and <|im_end|> is a target",
          "[data][chat]") {
  // A byte-level BPE of the 256 byte symbols plus the ChatML markers as special added tokens.
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level_char(static_cast<unsigned char>(b))] = b;
  nlohmann::json file = {
      {"version", "1.0"},
      {"added_tokens",
       {{{"id", 256}, {"content", "<|endoftext|>"}, {"special", true}, {"normalized", false}},
        {{"id", 257}, {"content", "<|im_start|>"}, {"special", true}, {"normalized", false}},
        {{"id", 258}, {"content", "<|im_end|>"}, {"special", true}, {"normalized", false}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
  ScratchDir dir;
  const auto tokenizer = make_tokenizer("hf:" + dir.write("tokenizer.json", file.dump()));
  const EncodedDocument encoded = encode("chatml", *tokenizer, {{"user", "Hi"}, {"assistant", "Yo"}});
  INFO(token_table(encoded, *tokenizer));
  const std::vector<int64_t> expected = {257, 'u', 's', 'e', 'r', '\n', 'H', 'i', 258, '\n',
                                         257, 'a', 's', 's', 'i', 's', 't', 'a', 'n', 't', '\n',
                                         'Y', 'o', 258, '\n', 256};
  CHECK(encoded.tokens == expected);
  //                                   <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n  Y  o  <|im_end|> \n eos
  const std::vector<uint8_t> loss = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0};
  CHECK(encoded.loss_mask == loss);
}

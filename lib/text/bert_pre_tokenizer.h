// BertPreTokenizer: the `pre_tokenizer` of a Hugging Face WordPiece tokenizer.json, which cuts
// normalized text into the words that WordPiece encodes separately. Supported:
// BertPreTokenizer (white space separates words and is dropped; each punctuation character,
// by the library's definition in bert_char_class.h, is a word of its own), WhitespaceSplit
// (white space only), a Sequence of these, and none (the text is one word). White space is
// Unicode White_Space, as Rust's char::is_whitespace. Pieces stream out one at a time.
#pragma once
#include <functional>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace xtrain::text {

class BertPreTokenizer {
 public:
  // Throws std::invalid_argument naming an unsupported type.
  explicit BertPreTokenizer(const nlohmann::json& spec);

  using PieceConsumer = std::function<void(std::string_view)>;
  // Calls consume for each non-empty piece of `text`, in order.
  void split(std::string_view text, const PieceConsumer& consume) const;

 private:
  void add(const nlohmann::json& spec);

  // Splitting at white space and isolating punctuation are each idempotent and commute, so a
  // Sequence of them comes down to these two flags.
  bool split_white_space_ = false;
  bool isolate_punctuation_ = false;
};

}  // namespace xtrain::text

// WordPieceModel: Hugging Face's WordPiece model, greedy longest-match-first. A word is cut from
// the left into the longest vocabulary tokens, each piece after the first looked up with the
// continuing-subword prefix ("##") in front. A word that cannot be covered to its end, or that
// has more than max_input_chars_per_word characters, becomes the single unknown token.
// Immutable after construction, so safe to share between threads.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace xtrain::text {

class WordPieceModel {
 public:
  struct Options {
    std::string continuing_subword_prefix = "##";
    size_t max_input_chars_per_word = 100;
    int64_t unk_id = 0;
  };
  // `vocab` holds (token, id) pairs.
  WordPieceModel(const std::vector<std::pair<std::string, int64_t>>& vocab, Options options);
  WordPieceModel(const WordPieceModel&) = delete;  // the maps view into text_
  WordPieceModel& operator=(const WordPieceModel&) = delete;

  // Appends the ids of `word` (one pre-tokenized piece) to `ids`.
  void encode(std::string_view word, std::vector<int64_t>& ids) const;

 private:
  Options options_;
  std::string text_;                                          // every token's text, back to back
  std::unordered_map<std::string_view, int64_t> whole_;       // a word's first piece: any token
  std::unordered_map<std::string_view, int64_t> continuing_;  // later pieces: prefixed tokens, prefix cut off
};

}  // namespace xtrain::text

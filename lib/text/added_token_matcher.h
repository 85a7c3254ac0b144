// AddedTokenMatcher: finds the added tokens of a Hugging Face tokenizer (special tokens such as
// <|endoftext|>, or user-added words) in text, as its AddedVocabulary does: leftmost-longest
// matches, with lstrip/rstrip widening a match over the white space beside it. The text
// between matches goes on to the normalizer, pre-tokenizer and model.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace xtrain::text {

struct AddedToken {
  std::string content;
  int64_t id = 0;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;  // matched in the normalized text rather than the raw text
};

class AddedTokenMatcher {
 public:
  struct Segment {
    size_t begin;
    size_t end;
    int64_t id;  // the added token's id, or -1 for text between tokens
  };

  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);

  // Splits `text` into non-empty segments covering it in order.
  std::vector<Segment> split(std::string_view text) const;
  bool empty() const { return nodes_.size() == 1; }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, uint32_t>> children;
    int32_t token = -1;  // index into tokens_ of the token ending here
  };
  uint32_t child(uint32_t node, unsigned char byte) const;
  // Length and token index of the longest token starting at `pos`; {0, -1} if none.
  std::pair<size_t, int32_t> longest_at(std::string_view text, size_t pos) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> nodes_;
  bool first_byte_[256] = {};
};

}  // namespace xtrain::text

#include "text/added_token_matcher.h"

#include "text/utf8.h"

namespace xtrain::text {

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens) : tokens_(tokens), nodes_(1) {
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& content = tokens_[t].content;
    if (content.empty()) continue;
    first_byte_[static_cast<unsigned char>(content[0])] = true;
    uint32_t node = 0;
    for (char c : content) {
      const auto byte = static_cast<unsigned char>(c);
      uint32_t next = child(node, byte);
      if (next == 0) {
        next = static_cast<uint32_t>(nodes_.size());
        nodes_[node].children.emplace_back(byte, next);
        nodes_.emplace_back();
      }
      node = next;
    }
    if (nodes_[node].token < 0) nodes_[node].token = static_cast<int32_t>(t);  // the first of duplicates wins
  }
}

uint32_t AddedTokenMatcher::child(uint32_t node, unsigned char byte) const {
  for (const auto& [b, next] : nodes_[node].children)
    if (b == byte) return next;
  return 0;
}

std::pair<size_t, int32_t> AddedTokenMatcher::longest_at(std::string_view text, size_t pos) const {
  std::pair<size_t, int32_t> best{0, -1};
  uint32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    node = child(node, static_cast<unsigned char>(text[i]));
    if (node == 0) break;
    if (nodes_[node].token >= 0) best = {i + 1 - pos, nodes_[node].token};
  }
  return best;
}

std::vector<AddedTokenMatcher::Segment> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<Segment> segments;
  size_t covered = 0;  // end of the last segment emitted
  for (size_t pos = 0; pos < text.size();) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    const auto [length, index] = longest_at(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[static_cast<size_t>(index)];
    size_t begin = pos;
    size_t end = pos + length;
    if (token.lstrip) {
      // Never reaching back into what an earlier match already took.
      while (begin > covered) {
        size_t before = begin;
        if (!utf8::is_white_space(utf8::previous(text, before))) break;
        begin = before;
      }
    }
    if (token.rstrip) {
      while (end < text.size()) {
        size_t after = end;
        if (!utf8::is_white_space(utf8::next(text, after))) break;
        end = after;
      }
    }
    if (begin > covered) segments.push_back({covered, begin, -1});
    segments.push_back({begin, end, token.id});
    covered = end;
    pos = end;
  }
  if (covered < text.size()) segments.push_back({covered, text.size(), -1});
  return segments;
}

}  // namespace xtrain::text

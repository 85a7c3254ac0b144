// TokenRanks: byte strings -> rank (the token id of tiktoken rank files), and back.
// Lookups take string_views so that probing a piece of a document allocates nothing.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace xtrain::text {

class TokenRanks {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // tokens[r] is the byte string of rank r; an empty string marks a rank with no token.
  explicit TokenRanks(std::vector<std::string> tokens);

  uint32_t rank(std::string_view bytes) const {
    auto it = rank_.find(bytes);
    return it == rank_.end() ? kNone : it->second;
  }
  const std::string& bytes(uint32_t rank) const { return tokens_[rank]; }
  size_t size() const { return tokens_.size(); }

 private:
  std::vector<std::string> tokens_;
  std::unordered_map<std::string_view, uint32_t> rank_;  // views into tokens_, which never grows
};

}  // namespace xtrain::text

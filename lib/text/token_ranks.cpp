#include "text/token_ranks.h"

namespace xtrain::text {

TokenRanks::TokenRanks(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {
  rank_.reserve(tokens_.size());
  for (size_t r = 0; r < tokens_.size(); ++r)
    if (!tokens_[r].empty()) rank_.emplace(tokens_[r], static_cast<uint32_t>(r));
}

}  // namespace xtrain::text

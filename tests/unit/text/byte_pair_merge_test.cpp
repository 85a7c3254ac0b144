#include <catch2/catch.hpp>

#include <random>

#include "text/byte_pair_merge.h"

using xtrain::text::byte_pair_merge;
using xtrain::text::TokenRanks;

namespace {

// tiktoken's _byte_pair_merge as written there: a linear scan for the lowest-ranked pair.
std::vector<int64_t> reference_merge(const std::string& piece, const TokenRanks& ranks) {
  std::vector<size_t> starts;
  for (size_t i = 0; i <= piece.size(); ++i) starts.push_back(i);
  while (starts.size() > 2) {
    uint32_t best = TokenRanks::kNone;
    size_t best_index = 0;
    for (size_t i = 0; i + 2 < starts.size(); ++i) {
      const uint32_t rank = ranks.rank(std::string_view(piece).substr(starts[i], starts[i + 2] - starts[i]));
      if (rank < best) best = rank, best_index = i;
    }
    if (best == TokenRanks::kNone) break;
    starts.erase(starts.begin() + static_cast<std::ptrdiff_t>(best_index) + 1);
  }
  std::vector<int64_t> ids;
  for (size_t i = 0; i + 1 < starts.size(); ++i)
    ids.push_back(ranks.rank(std::string_view(piece).substr(starts[i], starts[i + 1] - starts[i])));
  return ids;
}

// 256 single bytes, then merges over a 4-letter alphabet, so that long pieces merge deeply.
TokenRanks toy_ranks() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  for (const char* t : {"ab", "ba", "aa", "abab", "cd", "dc", "aab", "bab", "abc", "cdcd", "dd", "ddd", "dddd",
                        "ababab", "bb", "ca", "dab", "aaaa", "abcd"})
    tokens.emplace_back(t);
  return TokenRanks(tokens);
}

}  // namespace

TEST_CASE("byte pair merge matches tiktoken's linear scan", "[data][tokenizer]") {
  const TokenRanks ranks = toy_ranks();
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string piece(1 + rng() % (trial < 1900 ? 24 : 3000), 'a');
    for (char& c : piece) c = "abcd"[rng() % 4];
    std::vector<int64_t> ids;
    byte_pair_merge(piece, ranks, ids);
    REQUIRE(ids == reference_merge(piece, ranks));
  }
}

TEST_CASE("byte pair merge of short and unmergeable pieces", "[data][tokenizer]") {
  const TokenRanks ranks = toy_ranks();
  std::vector<int64_t> ids;
  byte_pair_merge("", ranks, ids);
  CHECK(ids.empty());
  byte_pair_merge("x", ranks, ids);
  CHECK(ids == std::vector<int64_t>{'x'});
  ids.clear();
  byte_pair_merge("xyz", ranks, ids);
  CHECK(ids == std::vector<int64_t>{'x', 'y', 'z'});
  ids.clear();
  byte_pair_merge("abab", ranks, ids);  // ab + ab, then abab
  CHECK(ids == std::vector<int64_t>{ranks.rank("abab")});
}

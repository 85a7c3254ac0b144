#include "text/byte_pair_merge.h"

#include <queue>

namespace xtrain::text {

void byte_pair_merge(std::string_view piece, const TokenRanks& ranks, std::vector<int64_t>& out) {
  const size_t n = piece.size();
  if (n == 0) return;
  if (n == 1) {
    if (uint32_t r = ranks.rank(piece); r != TokenRanks::kNone) out.push_back(r);
    return;
  }
  // Parts are kept as a linked list over their start offsets; next[n] == n closes the list.
  std::vector<uint32_t> next(n + 1), prev(n + 1);
  for (size_t i = 0; i <= n; ++i) {
    next[i] = static_cast<uint32_t>(i + 1 <= n ? i + 1 : n);
    prev[i] = static_cast<uint32_t>(i == 0 ? 0 : i - 1);
  }
  // pair_rank[i]: rank of the part starting at i joined with the part after it.
  std::vector<uint32_t> pair_rank(n, TokenRanks::kNone);
  auto rank_of_pair = [&](size_t start) -> uint32_t {
    const size_t second = next[start];
    if (second >= n) return TokenRanks::kNone;
    return ranks.rank(piece.substr(start, next[second] - start));
  };
  struct Candidate {
    uint32_t rank;
    uint32_t start;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : start > other.start;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  for (size_t i = 0; i + 1 < n; ++i) {
    pair_rank[i] = rank_of_pair(i);
    if (pair_rank[i] != TokenRanks::kNone) heap.push({pair_rank[i], static_cast<uint32_t>(i)});
  }
  std::vector<bool> alive(n, true);
  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    // An entry is current only while its part still starts there with that pair rank; every
    // current pair has an entry, so the smallest current entry is tiktoken's choice.
    if (!alive[top.start] || pair_rank[top.start] != top.rank) continue;
    const uint32_t start = top.start;
    const uint32_t absorbed = next[start];
    alive[absorbed] = false;
    next[start] = next[absorbed];
    prev[next[absorbed]] = start;
    pair_rank[start] = rank_of_pair(start);
    if (pair_rank[start] != TokenRanks::kNone) heap.push({pair_rank[start], start});
    if (start > 0) {
      const uint32_t before = prev[start];
      pair_rank[before] = rank_of_pair(before);
      if (pair_rank[before] != TokenRanks::kNone) heap.push({pair_rank[before], before});
    }
  }
  for (size_t start = 0; start < n; start = next[start]) {
    if (uint32_t r = ranks.rank(piece.substr(start, next[start] - start)); r != TokenRanks::kNone) out.push_back(r);
  }
}

}  // namespace xtrain::text

// tiktoken's byte-pair merge: split a piece into single bytes, then repeatedly join the
// adjacent pair whose concatenation has the lowest rank (the leftmost one on ties) until no
// adjacent pair is a token. Same result as tiktoken's _byte_pair_merge, but a heap keeps long
// pieces (a 100 KB run of digits or spaces) at O(n log n) instead of O(n^2).
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "text/token_ranks.h"

namespace xtrain::text {

// Appends the ranks of the merged parts of `piece` to `out`. A part that is not a token (only
// possible when the rank file lacks some single byte) is skipped.
void byte_pair_merge(std::string_view piece, const TokenRanks& ranks, std::vector<int64_t>& out);

}  // namespace xtrain::text

// A micro batch's part on one context-parallel rank (parallel/context_parallel.h): the tokens
// of the rank's spans of every row, their targets and target count, and the split itself, which
// the model's layout and the attention kernels read.
#pragma once
#include <cstdint>

#include "data/micro_batch.h"

namespace xtrain::train {

struct ContextSplit {
  int64_t ranks = 1;
  int64_t rank = 0;
  bool balance = true;  // parallel.cp_balance
};

// `whole` unchanged when split.ranks is 1.
data::MicroBatch context_part(const data::MicroBatch& whole, const ContextSplit& split);

}  // namespace xtrain::train

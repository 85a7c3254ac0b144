// A micro batch's part on one context-parallel rank (parallel/context_parallel.h): the tokens
// of the rank's spans of every row, their targets and target count, and the split itself, which
// the model's layout and the attention kernels read; with multi-token prediction, each depth's
// inputs and targets and the whole micro batch's target counts.
#pragma once
#include <cstdint>

#include "data/micro_batch.h"

namespace xtrain::train {

struct ContextSplit {
  int64_t ranks = 1;
  int64_t rank = 0;
  bool balance = true;  // parallel.cp_balance
  // model.mtp_layers: the micro batch's inputs and targets 1..depths_ahead further ahead, shifted
  // over the whole rows and split as they are (MicroBatch::inputs_ahead).
  int64_t depths_ahead = 0;
};

// `whole` unchanged when split.ranks is 1.
data::MicroBatch context_part(const data::MicroBatch& whole, const ContextSplit& split);

}  // namespace xtrain::train

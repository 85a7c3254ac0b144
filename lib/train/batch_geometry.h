// How a global batch splits into micro batches over data-parallel ranks: global batch = micro
// batch x accumulation steps x data-parallel ranks. The recipe fixes the global batch, so a run
// on another number of ranks trains the same thing; a geometry that does not divide is bad
// input, answered with the nearest settings that do.
#pragma once
#include <cstdint>

namespace xtrain::train {

// The accumulation steps per optimizer step; throws InputError naming the keys and the values
// that would fit when global_batch_size is not a multiple of micro_batch_size x data_ranks.
int64_t accumulation_steps(int64_t global_batch_size, int64_t micro_batch_size, int64_t data_ranks);

}  // namespace xtrain::train

// How a global batch splits into micro batches over data-parallel ranks: global batch = micro
// batch x accumulation steps x data-parallel ranks. The recipe fixes the global batch, so a run
// on another number of ranks trains the same thing; a geometry that does not divide is bad
// input, answered with the nearest settings that do. The recipe loader checks it when the
// recipe fixes the data-parallel ranks (parallel.dp and parallel.fsdp), the trainer always.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace xtrain::config {

// nullopt when global_batch_size splits evenly; else what is wrong with it ("16 must be a
// multiple of ...") and the settings that would fit.
std::optional<std::string> batch_geometry_problem(int64_t global_batch_size, int64_t micro_batch_size,
                                                  int64_t data_ranks);

}  // namespace xtrain::config

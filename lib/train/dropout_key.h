// The key of a training micro batch's dropout masks (model/layers/keyed_dropout.h): run.seed,
// the step, and each token's identity in the data, sample index * seq_len + position in the
// sample, whatever rows, ranks or context-parallel spans the token reached it through. The same
// sample trained at the same step thus gets the same masks under every layout.
#pragma once
#include <cstdint>

#include <c10/core/Device.h>

#include "data/micro_batch.h"
#include "model/layers/keyed_dropout.h"

namespace xtrain::train {

// Undefined (no dropout) when the micro batch has no sample ids.
model::DropoutKey dropout_key(const data::MicroBatch& batch, uint64_t seed, int64_t step, const torch::Device& device);

}  // namespace xtrain::train

#include "train/dropout_key.h"

#include <ATen/ATen.h>

#include "model/layers/sequence_layout.h"

namespace xtrain::train {

model::DropoutKey dropout_key(const data::MicroBatch& batch, uint64_t seed, int64_t step, const torch::Device& device) {
  model::DropoutKey key{seed, step, {}};
  if (!batch.sample_ids.defined() || batch.sample_ids.numel() == 0) return key;
  // The whole rows this micro batch's tokens come from: [rows, row_length], holding the samples
  // in order (one a row, or a packed row of several).
  const int64_t rows = batch.inputs.size(0);
  const int64_t row_length = batch.context ? batch.context->row_length : batch.inputs.size(1);
  const int64_t seq_len = rows * row_length / batch.sample_ids.numel();
  auto tokens = (batch.sample_ids.view({-1, 1}) * seq_len + at::arange(seq_len, at::kLong)).reshape({rows, row_length});
  if (batch.context) tokens = tokens.index_select(1, batch.context->row_index(batch.context->rank));
  key.tokens = tokens.to(device);
  return key;
}

}  // namespace xtrain::train

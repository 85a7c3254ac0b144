#include "layout/loss_chunking.h"

#include <algorithm>

namespace xtrain::layout {

int64_t auto_chunk_tokens(int64_t vocab_size, int64_t num_tokens, int64_t budget_bytes) {
  // Two fp32 [chunk, V] buffers, the logits and the gradient they become; the forward pass reuses
  // one buffer for both, so this is an upper bound.
  const int64_t bytes_per_row = 2 * std::max<int64_t>(vocab_size, 1) * static_cast<int64_t>(sizeof(float));
  return std::clamp<int64_t>(budget_bytes / bytes_per_row, 1, std::max<int64_t>(num_tokens, 1));
}

int64_t loss_chunk_tokens(const std::string& spec, int64_t vocab_size, int64_t micro_batch_tokens) {
  if (spec == "off") return 0;
  if (spec == "auto") return auto_chunk_tokens(vocab_size, micro_batch_tokens);
  return std::stoll(spec);
}

}  // namespace xtrain::layout

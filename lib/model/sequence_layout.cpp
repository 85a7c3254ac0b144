#include "model/sequence_layout.h"

#include <torch/torch.h>

#include "model/attention.h"

namespace xtrain::model {

SequenceLayout packed_layout(const torch::Tensor& cu_seqlens) {
  const int64_t seq = cu_seqlens[-1].item<int64_t>();
  const auto doc = document_ids(cu_seqlens, seq);
  return {cu_seqlens, torch::arange(seq, torch::kInt64) - cu_seqlens.index_select(0, doc)};
}

}  // namespace xtrain::model

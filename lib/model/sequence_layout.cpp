#include "model/sequence_layout.h"

#include <torch/torch.h>

#include "model/attention.h"

namespace xtrain::model {

SequenceLayout packed_layout(const torch::Tensor& cu_seqlens, const torch::Device& device) {
  const auto bounds = cu_seqlens.to(torch::kCPU);
  const int64_t seq = bounds[-1].item<int64_t>();
  const auto doc = document_ids(bounds, seq);
  const auto positions = torch::arange(seq, torch::kInt64) - bounds.index_select(0, doc);
  const int64_t longest = seq > 0 ? (bounds.narrow(0, 1, bounds.numel() - 1) - bounds.narrow(0, 0, bounds.numel() - 1))
                                        .max()
                                        .item<int64_t>()
                                  : 0;
  return {bounds, positions.to(device, /*non_blocking=*/true), longest};
}

}  // namespace xtrain::model

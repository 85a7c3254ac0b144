#include "model/layers/sequence_layout.h"

#include <torch/torch.h>

#include "model/attention/attention.h"

namespace xtrain::model {

int64_t ContextShard::local_length() const {
  int64_t length = 0;
  for (const auto& span : spans.at(static_cast<size_t>(rank))) length += span.length;
  return length;
}

torch::Tensor ContextShard::row_index(int64_t r) const {
  std::vector<torch::Tensor> parts;
  for (const auto& span : spans.at(static_cast<size_t>(r)))
    parts.push_back(torch::arange(span.begin, span.end(), torch::kInt64));
  return parts.empty() ? torch::empty({0}, torch::kInt64) : torch::cat(parts);
}

SequenceLayout packed_layout(const torch::Tensor& cu_seqlens, const torch::Device& device) {
  const auto bounds = cu_seqlens.to(torch::kCPU);
  const int64_t seq = bounds[-1].item<int64_t>();
  const auto doc = document_ids(bounds, seq);
  const auto positions = torch::arange(seq, torch::kInt64) - bounds.index_select(0, doc);
  const int64_t longest = seq > 0 ? (bounds.narrow(0, 1, bounds.numel() - 1) - bounds.narrow(0, 0, bounds.numel() - 1))
                                        .max()
                                        .item<int64_t>()
                                  : 0;
  return {bounds, positions.to(device, /*non_blocking=*/true), longest, nullptr};
}

SequenceLayout context_layout(const SequenceLayout& whole, std::shared_ptr<const ContextShard> shard,
                              const torch::Device& device) {
  const auto mine = shard->row_index(shard->rank);
  const auto positions = whole.positions.defined() ? whole.positions.to(torch::kCPU).index_select(0, mine) : mine;
  const int64_t longest = whole.packed() ? whole.longest : shard->row_length;
  return {whole.cu_seqlens, positions.to(device, /*non_blocking=*/true), longest, std::move(shard)};
}

}  // namespace xtrain::model

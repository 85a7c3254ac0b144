#include "parallel/ulysses_attention.h"

#include <vector>

#include <torch/torch.h>

#include "parallel/autograd_collectives.h"

namespace xtrain::parallel {
namespace {

// [B, X, T_local, D] with X heads -> [B, X / n, n * T_local, D]: rank i's tokens of head group
// `rank`, in rank order (rank i sent its spans' tokens).
torch::Tensor heads_to_sequence(const std::shared_ptr<Comm>& comm, const torch::Tensor& x) {
  const int64_t n = comm->size(), batch = x.size(0), heads = x.size(1), seq = x.size(2), dim = x.size(3);
  auto rows = x.reshape({batch, n, heads / n, seq, dim}).transpose(0, 1);  // [n, B, X/n, T, D]
  const std::vector<int64_t> one_each(static_cast<size_t>(n), 1);
  auto received = all_to_all_rows(comm, rows.contiguous(), one_each, one_each);  // [n (source), B, X/n, T, D]
  return received.permute({1, 2, 0, 3, 4}).reshape({batch, heads / n, n * seq, dim});
}

// The reverse: [B, X / n, n * T_local, D] in rank order -> [B, X, T_local, D].
torch::Tensor sequence_to_heads(const std::shared_ptr<Comm>& comm, const torch::Tensor& x) {
  const int64_t n = comm->size(), batch = x.size(0), group = x.size(1), seq = x.size(2) / n, dim = x.size(3);
  auto rows = x.reshape({batch, group, n, seq, dim}).permute({2, 0, 1, 3, 4});  // [n, B, X/n, T, D]
  const std::vector<int64_t> one_each(static_cast<size_t>(n), 1);
  auto received = all_to_all_rows(comm, rows.contiguous(), one_each, one_each);  // [n (head group), B, X/n, T, D]
  return received.transpose(0, 1).reshape({batch, n * group, seq, dim});
}

}  // namespace

torch::Tensor ulysses_attention(const std::shared_ptr<Comm>& comm, const model::AttentionKernel& inner,
                                const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const model::SequenceLayout& layout, const model::AttentionVariant& variant) {
  const auto& shard = layout.context;
  const int64_t n = comm->size();
  TORCH_CHECK(shard && shard->ranks() == n && shard->rank == comm->rank(),
              "Ulysses attention needs the row's split over the ", n, " ranks of group '", comm->name(), "'");
  TORCH_CHECK(q.size(1) % n == 0 && k.size(1) % n == 0, "Ulysses attention: ", q.size(1), " query and ", k.size(1),
              " key/value heads do not split over ", n, " ranks");
  // Rank order -> row order, and back.
  std::vector<torch::Tensor> parts;
  for (int64_t r = 0; r < n; ++r) parts.push_back(shard->row_index(r));
  const auto rank_order = torch::cat(parts).to(q.device());  // the row position of each token in rank order
  const auto row_order = torch::empty_like(rank_order).index_put_({rank_order}, torch::arange(rank_order.numel(), rank_order.options()));
  auto whole = [&](const torch::Tensor& x) { return heads_to_sequence(comm, x).index_select(2, row_order); };
  const model::SequenceLayout row{layout.cu_seqlens, {}, layout.longest, nullptr};
  const auto wq = whole(q), wk = whole(k), wv = whole(v);
  variant.check(q.size(1));
  auto mine = variant;  // this rank's head group, the one heads_to_sequence brought here
  if (variant.has_sinks()) mine.sinks = variant.sinks.narrow(0, comm->rank() * wq.size(1), wq.size(1));
  auto attended = inner ? inner(wq, wk, wv, row, mine) : model::causal_attention(wq, wk, wv, row.cu_seqlens, mine);
  return sequence_to_heads(comm, attended.index_select(2, rank_order));
}

}  // namespace xtrain::parallel

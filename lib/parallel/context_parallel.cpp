#include "parallel/context_parallel.h"

#include <algorithm>
#include <numeric>

#include "parallel/ulysses_attention.h"

namespace xtrain::parallel {
namespace {

using model::TokenSpan;

// Sum over the span's tokens of (position in document + 1).
double span_cost(const TokenSpan& span, const std::vector<int64_t>& bounds) {
  double cost = 0;
  for (size_t d = 0; d + 1 < bounds.size(); ++d) {
    const int64_t first = std::max(span.begin, bounds[d]), end = std::min(span.end(), bounds[d + 1]);
    if (first >= end) continue;
    // Positions first - bounds[d] .. end - 1 - bounds[d], each seeing itself and those before.
    const double a = static_cast<double>(first - bounds[d] + 1), b = static_cast<double>(end - bounds[d]);
    cost += (a + b) * (b - a + 1) / 2;
  }
  return cost;
}

double max_cost(const model::ContextShard& shard, const std::vector<int64_t>& bounds) {
  const auto costs = context_rank_costs(shard, bounds);
  return *std::max_element(costs.begin(), costs.end());
}

// Adjacent spans in row order joined.
std::vector<TokenSpan> joined(std::vector<TokenSpan> spans) {
  std::sort(spans.begin(), spans.end(), [](const TokenSpan& a, const TokenSpan& b) { return a.begin < b.begin; });
  std::vector<TokenSpan> out;
  for (const auto& span : spans) {
    if (!out.empty() && out.back().end() == span.begin)
      out.back().length += span.length;
    else
      out.push_back(span);
  }
  return out;
}

model::ContextShard head_tail(int64_t length, int64_t ranks) {
  const int64_t chunk = length / (2 * ranks);
  model::ContextShard shard{length, 0, {}};
  for (int64_t r = 0; r < ranks; ++r)
    shard.spans.push_back(joined({{r * chunk, chunk}, {(2 * ranks - 1 - r) * chunk, chunk}}));
  return shard;
}

// Chunks of length / (2 ranks g), g the largest of 8, 4, 2 that divides, dealt out heaviest
// first to the lightest rank with room.
model::ContextShard dealt(int64_t length, const std::vector<int64_t>& bounds, int64_t ranks) {
  int64_t pieces = 2 * ranks;
  for (int64_t g : {8, 4, 2})
    if (length % (2 * ranks * g) == 0) {
      pieces = 2 * ranks * g;
      break;
    }
  const int64_t chunk = length / pieces, per_rank = pieces / ranks;
  std::vector<std::pair<double, int64_t>> by_cost;  // (cost, chunk index)
  for (int64_t c = 0; c < pieces; ++c) by_cost.emplace_back(span_cost({c * chunk, chunk}, bounds), c);
  std::stable_sort(by_cost.begin(), by_cost.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<double> load(static_cast<size_t>(ranks), 0.0);
  std::vector<std::vector<TokenSpan>> spans(static_cast<size_t>(ranks));
  for (const auto& [cost, c] : by_cost) {
    size_t best = spans.size();
    for (size_t r = 0; r < spans.size(); ++r)
      if (static_cast<int64_t>(spans[r].size()) < per_rank && (best == spans.size() || load[r] < load[best])) best = r;
    load[best] += cost;
    spans[best].push_back({c * chunk, chunk});
  }
  model::ContextShard shard{length, 0, {}};
  for (auto& mine : spans) shard.spans.push_back(joined(std::move(mine)));
  return shard;
}

}  // namespace

std::vector<double> context_rank_costs(const model::ContextShard& shard, const std::vector<int64_t>& bounds) {
  const std::vector<int64_t> one_sequence{0, shard.row_length};
  const auto& documents = bounds.empty() ? one_sequence : bounds;
  std::vector<double> costs;
  for (const auto& spans : shard.spans) {
    double cost = 0;
    for (const auto& span : spans) cost += span_cost(span, documents);
    costs.push_back(cost);
  }
  return costs;
}

std::shared_ptr<const model::ContextShard> plan_context_shard(int64_t length, const std::vector<int64_t>& bounds,
                                                              int64_t ranks, int64_t rank, bool balance) {
  if (length % (2 * ranks) != 0)
    throw std::invalid_argument("a row of " + std::to_string(length) + " tokens does not cut into 2 x " +
                                std::to_string(ranks) + " equal chunks");
  auto shard = head_tail(length, ranks);
  if (balance && bounds.size() > 2) {
    auto other = dealt(length, bounds, ranks);
    if (max_cost(other, bounds) < max_cost(shard, bounds)) shard = std::move(other);
  }
  shard.rank = rank;
  return std::make_shared<const model::ContextShard>(std::move(shard));
}

memory::KernelWrap context_parallel_kernel(const DeviceMesh& mesh, ContextKind kind, int64_t block_size,
                                           std::shared_ptr<RingTimes> times) {
  auto comm = mesh.group(Dim::cp);
  if (kind == ContextKind::ring)
    return [comm, block_size, times](const model::AttentionKernel&) -> model::AttentionKernel {
      return [comm, block_size, times](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const model::SequenceLayout& layout, const model::AttentionVariant& variant) {
        return ring_attention(comm, q, k, v, layout, variant, block_size, times);
      };
    };
  return [comm](const model::AttentionKernel& chosen) -> model::AttentionKernel {
    return [comm, chosen](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                          const model::SequenceLayout& layout, const model::AttentionVariant& variant) {
      return ulysses_attention(comm, chosen, q, k, v, layout, variant);
    };
  };
}

}  // namespace xtrain::parallel

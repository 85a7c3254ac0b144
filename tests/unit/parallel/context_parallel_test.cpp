// Context parallelism over in-process ranks: ring and Ulysses attention on each rank's spans of
// a row give that rank's rows of causal attention over the whole row, and the whole row's
// gradients of q, k and v, for one sequence and for packed documents; the head-tail split and
// the balanced one. With attention variants (a sliding window, sinks, a scale and a value head
// dim of its own) on packed documents longer than the window, too: the ranks' sink gradients
// sum to the whole row's.
#include <numeric>
#include <ostream>
#include <vector>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include "model/attention/attention.h"
#include "model/attention/blockwise_attention.h"
#include "parallel/context_parallel.h"
#include "parallel/thread_comm.h"
#include "parallel/ulysses_attention.h"
#include "rank_threads.h"
#include "tensor_compare.h"

using namespace xtrain;

namespace xtrain::model {
std::ostream& operator<<(std::ostream& out, const TokenSpan& span) {
  return out << "[" << span.begin << ", " << span.end() << ")";
}
}  // namespace xtrain::model

namespace {

// Rank r's layout of a row of `seq` tokens (packed as cu_seqlens says, when defined) split over
// `ranks` with balancing, and the row positions of its tokens.
std::pair<model::SequenceLayout, torch::Tensor> rank_layout(int64_t seq, const std::vector<int64_t>& bounds,
                                                            const torch::Tensor& cu_seqlens, int64_t ranks, int64_t r) {
  auto shard = parallel::plan_context_shard(seq, bounds, ranks, r, /*balance=*/true);
  const auto mine = shard->row_index(r);
  model::SequenceLayout whole;
  if (cu_seqlens.defined()) whole = model::packed_layout(cu_seqlens);
  return {model::context_layout(whole, shard), mine};
}

struct ContextCase {
  int64_t ranks, heads, kv_heads, batch;
  std::vector<int64_t> bounds;  // empty: one sequence of 64 tokens
  parallel::ContextKind kind;
};

// The largest difference of any rank's output and gradients from the whole row's.
double worst_context_difference(const ContextCase& c) {
  constexpr int64_t kSeq = 64, kDim = 8;
  torch::manual_seed(7);
  const auto q = torch::randn({c.batch, c.heads, kSeq, kDim}), k = torch::randn({c.batch, c.kv_heads, kSeq, kDim}),
             v = torch::randn({c.batch, c.kv_heads, kSeq, kDim}), w = torch::randn({c.batch, c.heads, kSeq, kDim});
  const auto cu_seqlens = c.bounds.empty() ? torch::Tensor() : torch::tensor(c.bounds, torch::kInt64);
  const auto qr = q.clone().requires_grad_(true), kr = k.clone().requires_grad_(true),
             vr = v.clone().requires_grad_(true);
  const auto reference = model::causal_attention(qr, kr, vr, cu_seqlens);
  (reference * w).sum().backward();

  const auto comms = parallel::make_thread_comms(c.ranks, "cp");
  std::vector<double> worst(static_cast<size_t>(c.ranks), 0.0);
  const auto errors = testing::run_ranks(c.ranks, [&](int64_t r) {
    const auto [layout, mine] = rank_layout(kSeq, c.bounds, cu_seqlens, c.ranks, r);
    auto part = [&](const torch::Tensor& t) { return t.index_select(2, mine).detach().requires_grad_(true); };
    auto ql = part(q), kl = part(k), vl = part(v);
    const auto out = c.kind == parallel::ContextKind::ring
                         ? parallel::ring_attention(comms[static_cast<size_t>(r)], ql, kl, vl, layout, {}, 16)
                         : parallel::ulysses_attention(comms[static_cast<size_t>(r)], {}, ql, kl, vl, layout);
    (out * w.index_select(2, mine)).sum().backward();
    auto gap = [&](const torch::Tensor& a, const torch::Tensor& whole_row) {
      return (a - whole_row.index_select(2, mine)).abs().max().item<double>();
    };
    worst[static_cast<size_t>(r)] = std::max({gap(out, reference.detach()), gap(ql.grad(), qr.grad()),
                                              gap(kl.grad(), kr.grad()), gap(vl.grad(), vr.grad())});
  });
  REQUIRE(errors == std::vector<std::string>(static_cast<size_t>(c.ranks), ""));
  return *std::max_element(worst.begin(), worst.end());
}

}  // namespace

TEST_CASE("ring attention over 2 and 4 ranks equals attention over the whole row", "[parallel][context]") {
  const std::vector<int64_t> documents{0, 5, 5, 19, 40, 64};  // an empty one, and one across the middle
  for (int64_t ranks : {2, 4})
    for (const auto& bounds : {std::vector<int64_t>{}, documents}) {
      CAPTURE(ranks, bounds.size());
      CHECK(worst_context_difference({ranks, 4, 2, bounds.empty() ? 2 : 1, bounds, parallel::ContextKind::ring}) <
            1e-5);
    }
}

TEST_CASE("Ulysses attention over 2 and 4 ranks equals attention over the whole row", "[parallel][context]") {
  const std::vector<int64_t> documents{0, 5, 5, 19, 40, 64};
  for (const auto& bounds : {std::vector<int64_t>{}, documents}) {
    CAPTURE(bounds.size());
    CHECK(worst_context_difference({2, 4, 2, bounds.empty() ? 2 : 1, bounds, parallel::ContextKind::ulysses}) < 1e-5);
    CHECK(worst_context_difference({4, 8, 4, 1, bounds, parallel::ContextKind::ulysses}) < 1e-5);
  }
}

TEST_CASE("the head-tail split gives rank r chunks r and 2cp-1-r", "[parallel][context]") {
  const auto shard = parallel::plan_context_shard(16, {}, 2, 1, true);
  using Spans = std::vector<model::TokenSpan>;
  CHECK(shard->spans[0] == Spans{{0, 4}, {12, 4}});
  CHECK(shard->spans[1] == Spans{{4, 8}});  // chunks 1 and 2 are adjacent: one span
  CHECK(shard->local_length() == 8);
  CHECK(torch::equal(shard->row_index(0), torch::tensor({0, 1, 2, 3, 12, 13, 14, 15}, torch::kInt64)));
  // One causal sequence: 1 + ... + 4 + 13 + ... + 16 = 68 keys seen against 5 + ... + 12 = 68.
  CHECK(parallel::context_rank_costs(*shard, {}) == std::vector<double>{68, 68});
  CHECK_THROWS_WITH(parallel::plan_context_shard(20, {}, 4, 0, true),
                    "a row of 20 tokens does not cut into 2 x 4 equal chunks");
}

TEST_CASE("balancing evens the causal work of skewed packed documents over the cp ranks", "[parallel][context]") {
  // One long document and many short ones: head-tail gives the rank with the long document's
  // tail most of the work.
  const std::vector<int64_t> bounds{0, 3000, 3200, 3400, 3600, 3800, 4000, 4096};
  auto spread = [&](bool balance) {
    const auto costs = parallel::context_rank_costs(*parallel::plan_context_shard(4096, bounds, 4, 0, balance), bounds);
    const double mean = std::accumulate(costs.begin(), costs.end(), 0.0) / static_cast<double>(costs.size());
    return *std::max_element(costs.begin(), costs.end()) / mean;
  };
  CAPTURE(spread(false), spread(true));
  CHECK(spread(false) > 1.2);
  CHECK(spread(true) <= 1.05);
}

namespace {

struct ContextVariantCase {
  int64_t ranks;
  parallel::ContextKind kind;
  int64_t window;
  bool sinks;
  std::vector<int64_t> bounds;  // empty: one sequence of 64 tokens
  bool blockwise_inner = false;  // Ulysses: around the blockwise kernel rather than the eager one
};

// The worst relative error of any rank's output and q, k, v gradients against the whole row's,
// and of the ranks' summed sink gradient. In float64: a narrow window leaves rows of few keys,
// whose gradients cancel enough to lift fp32 rounding to 1e-5 of the tensor's scale on some
// kernels, while a wrong mask or merge shows at any precision.
double worst_context_variant_error(const ContextVariantCase& c) {
  constexpr int64_t kSeq = 64, kHeads = 8, kKvHeads = 4, kDim = 8, kValueDim = 6, kBatch = 2;
  torch::manual_seed(17);
  const auto f64 = torch::kFloat64;
  const auto q = torch::randn({kBatch, kHeads, kSeq, kDim}, f64), k = torch::randn({kBatch, kKvHeads, kSeq, kDim}, f64),
             v = torch::randn({kBatch, kKvHeads, kSeq, kValueDim}, f64),
             w = torch::randn({kBatch, kHeads, kSeq, kValueDim}, f64);
  const auto sinks = torch::randn({kHeads}, f64);
  const auto cu_seqlens = c.bounds.empty() ? torch::Tensor() : torch::tensor(c.bounds, torch::kInt64);
  auto leaf = [](const torch::Tensor& t) { return t.clone().requires_grad_(true); };
  const auto qr = leaf(q), kr = leaf(k), vr = leaf(v), sr = leaf(sinks);
  const auto reference =
      model::causal_attention(qr, kr, vr, cu_seqlens, {0.4, c.window, c.sinks ? sr : torch::Tensor()});
  (reference * w).sum().backward();

  const auto comms = parallel::make_thread_comms(c.ranks, "cp");
  std::vector<double> worst(static_cast<size_t>(c.ranks), 0.0);
  std::vector<torch::Tensor> sink_grads(static_cast<size_t>(c.ranks));
  const model::AttentionKernel blockwise = [](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                              const model::SequenceLayout& layout,
                                              const model::AttentionVariant& variant) {
    return model::blockwise_causal_attention(q, k, v, layout.cu_seqlens, 8, variant);
  };
  const auto errors = testing::run_ranks(c.ranks, [&](int64_t r) {
    const auto [layout, mine] = rank_layout(kSeq, c.bounds, cu_seqlens, c.ranks, r);
    auto part = [&](const torch::Tensor& t) { return t.index_select(2, mine).detach().requires_grad_(true); };
    auto ql = part(q), kl = part(k), vl = part(v);
    const auto sl = leaf(sinks);
    const model::AttentionVariant variant{0.4, c.window, c.sinks ? sl : torch::Tensor()};
    const auto& comm = comms[static_cast<size_t>(r)];
    const auto out = c.kind == parallel::ContextKind::ring
                         ? parallel::ring_attention(comm, ql, kl, vl, layout, variant, 16)
                         : parallel::ulysses_attention(comm, c.blockwise_inner ? blockwise : model::AttentionKernel(),
                                                       ql, kl, vl, layout, variant);
    (out * w.index_select(2, mine)).sum().backward();
    auto gap = [&](const torch::Tensor& a, const torch::Tensor& whole_row) {
      return testing::max_relative_error(a, whole_row.index_select(2, mine));
    };
    worst[static_cast<size_t>(r)] = std::max({gap(out, reference.detach()), gap(ql.grad(), qr.grad()),
                                              gap(kl.grad(), kr.grad()), gap(vl.grad(), vr.grad())});
    if (c.sinks) sink_grads[static_cast<size_t>(r)] = sl.grad();
  });
  REQUIRE(errors == std::vector<std::string>(static_cast<size_t>(c.ranks), ""));
  double result = *std::max_element(worst.begin(), worst.end());
  if (c.sinks) {
    const auto summed = torch::stack(sink_grads).sum(0);
    result = std::max(result, testing::max_relative_error(summed, sr.grad()));
  }
  return result;
}

const std::vector<int64_t> kContextVariantDocuments{0, 5, 5, 19, 40, 64};  // two documents longer than the window

}  // namespace

TEST_CASE("ring attention with window, sinks and scale over 2 and 4 ranks equals the whole row's",
          "[parallel][context][variant]") {
  double worst = 0;
  for (int64_t ranks : {2, 4})
    for (int64_t window : {6, 20})
      for (bool sinks : {false, true})
        for (const auto& bounds : {std::vector<int64_t>{}, kContextVariantDocuments}) {
          CAPTURE(ranks, window, sinks, bounds.size());
          const double error =
              worst_context_variant_error({ranks, parallel::ContextKind::ring, window, sinks, bounds});
          CHECK(error < 1e-12);
          worst = std::max(worst, error);
        }
  WARN("ring variants: worst relative error " << worst);
}

TEST_CASE("Ulysses attention with window, sinks and scale over 2 and 4 ranks equals the whole row's",
          "[parallel][context][variant]") {
  double worst = 0;
  for (int64_t ranks : {2, 4})
    for (bool blockwise_inner : {false, true})
      for (const auto& bounds : {std::vector<int64_t>{}, kContextVariantDocuments}) {
        CAPTURE(ranks, blockwise_inner, bounds.size());
        const double error = worst_context_variant_error(
            {ranks, parallel::ContextKind::ulysses, 6, true, bounds, blockwise_inner});
        CHECK(error < 1e-12);
        worst = std::max(worst, error);
      }
  WARN("Ulysses variants: worst relative error " << worst);
}

// Context parallelism over in-process ranks: ring and Ulysses attention on each rank's spans of
// a row give that rank's rows of causal attention over the whole row, and the whole row's
// gradients of q, k and v, for one sequence and for packed documents; the head-tail split and
// the balanced one.
#include <numeric>
#include <ostream>
#include <vector>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include "model/attention.h"
#include "parallel/context_parallel.h"
#include "parallel/thread_comm.h"
#include "parallel/ulysses_attention.h"
#include "rank_threads.h"

using namespace xtrain;

namespace xtrain::model {
std::ostream& operator<<(std::ostream& out, const TokenSpan& span) {
  return out << "[" << span.begin << ", " << span.end() << ")";
}
}  // namespace xtrain::model

namespace {

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
    auto shard = parallel::plan_context_shard(kSeq, c.bounds, c.ranks, r, /*balance=*/true);
    const auto mine = shard->row_index(r);
    model::SequenceLayout whole;
    if (cu_seqlens.defined()) whole = model::packed_layout(cu_seqlens);
    const auto layout = model::context_layout(whole, shard);
    auto part = [&](const torch::Tensor& t) { return t.index_select(2, mine).detach().requires_grad_(true); };
    auto ql = part(q), kl = part(k), vl = part(v);
    const auto out = c.kind == parallel::ContextKind::ring
                         ? parallel::ring_attention(comms[static_cast<size_t>(r)], ql, kl, vl, layout, 16)
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

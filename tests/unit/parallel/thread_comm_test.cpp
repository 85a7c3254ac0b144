// The in-process Comm (ranks as threads): every collective's contract, all-to-all with uneven
// and zero splits, batched point-to-point in a ring, and the errors a real backend would only
// show as a hang: collectives called in different orders, a rank that never arrives.
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include "parallel/comm.h"
#include "parallel/thread_comm.h"
#include "rank_threads.h"
#include "uneven_all_to_all.h"

using namespace xtrain;
using parallel::PeerTransfer;
using testing::run_ranks;

namespace {
std::vector<std::string> no_errors(int64_t ranks) { return std::vector<std::string>(static_cast<size_t>(ranks), ""); }
}  // namespace

TEST_CASE("thread comm collectives: gather, reduce-scatter, all-reduce, broadcast, along a dimension", "[parallel][comm]") {
  const int64_t n = 3;
  auto comms = parallel::make_thread_comms(n, "fsdp");
  std::vector<torch::Tensor> gathered(n), scattered(n), reduced(n), broadcast(n), along(n), scattered_along(n);
  auto errors = run_ranks(n, [&](int64_t r) {
    auto& comm = *comms[static_cast<size_t>(r)];
    CHECK(comm.rank() == r);
    CHECK(comm.size() == n);
    gathered[r] = torch::empty({6});
    comm.all_gather(gathered[r], torch::full({2}, static_cast<float>(r))).wait();
    scattered[r] = torch::empty({2});
    comm.reduce_scatter_sum(scattered[r], torch::arange(6, torch::kFloat32) * (r + 1)).wait();
    reduced[r] = torch::tensor({0.5 * static_cast<double>(r)}, torch::kFloat64);
    comm.all_reduce_sum(reduced[r]).wait();
    broadcast[r] = torch::full({3}, static_cast<float>(r));
    comm.broadcast(broadcast[r], 2).wait();
    along[r] = parallel::all_gather_along(comm, torch::full({2, 1}, static_cast<float>(r)), 1);
    scattered_along[r] = parallel::reduce_scatter_along(comm, torch::arange(6, torch::kFloat32).view({2, 3}), 1);
    comm.barrier();
  });
  CHECK(errors == no_errors(n));
  for (int64_t r = 0; r < n; ++r) {
    CHECK(torch::equal(gathered[r], torch::tensor({0.f, 0.f, 1.f, 1.f, 2.f, 2.f})));
    // Sum over ranks of arange(6) * (r + 1) = arange(6) * 6; rank r keeps elements [2r, 2r + 2).
    CHECK(torch::equal(scattered[r], torch::arange(2 * r, 2 * r + 2, torch::kFloat32) * 6));
    CHECK(reduced[r].item<double>() == 1.5);
    CHECK(torch::equal(broadcast[r], torch::full({3}, 2.f)));
    CHECK(torch::equal(along[r], torch::tensor({0.f, 1.f, 2.f}).expand({2, 3})));
    CHECK(torch::equal(scattered_along[r], (torch::arange(6, torch::kFloat32).view({2, 3}) * 3).narrow(1, r, 1)));
  }
}

TEST_CASE("thread comm all-to-all with uneven and zero splits", "[parallel][comm]") {
  const testing::UnevenAllToAll uneven;
  auto comms = parallel::make_thread_comms(uneven.kRanks, "ep");
  std::vector<torch::Tensor> out(uneven.kRanks);
  auto errors = run_ranks(uneven.kRanks, [&](int64_t r) { out[r] = uneven.run(*comms[r], r); });
  CHECK(errors == no_errors(uneven.kRanks));
  for (int64_t r = 0; r < uneven.kRanks; ++r) CHECK(torch::equal(out[r], uneven.expected(r)));

  // Splits that disagree are an error on every rank, not a hang or a silent truncation.
  auto bad = parallel::make_thread_comms(2, "ep");
  errors = run_ranks(2, [&](int64_t r) {
    auto in = torch::zeros({r == 0 ? 2 : 1, 4});
    auto o = torch::zeros({r == 0 ? 1 : 2, 4});
    // Rank 0 sends itself a row but expects none from itself.
    bad[r]->all_to_all(o, in, r == 0 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{1, 1},
                       r == 0 ? std::vector<int64_t>{1, 1} : std::vector<int64_t>{1, 0});
  });
  const std::string expected = "all_to_all on thread group 'ep' (2 ranks): all_to_all: rank 0 sends 1 row(s) to rank "
                               "0, which expects 0";
  CHECK(errors == std::vector<std::string>{expected, expected});
}

TEST_CASE("thread comm batched send and recv in a ring", "[parallel][comm]") {
  const int64_t n = 4;
  auto comms = parallel::make_thread_comms(n, "pp");
  std::vector<torch::Tensor> from_left(n), from_right(n), second(n);
  auto errors = run_ranks(n, [&](int64_t r) {
    const int64_t right = (r + 1) % n, left = (r + n - 1) % n;
    from_left[r] = torch::empty({3});
    from_right[r] = torch::empty({3});
    second[r] = torch::empty({1});
    // Both directions at once, receives listed first: a blocking backend would deadlock on this
    // order without deadlock_free_order.
    comms[r]->send_recv({{PeerTransfer::Kind::recv, from_left[r], left},
                         {PeerTransfer::Kind::recv, from_right[r], right},
                         {PeerTransfer::Kind::recv, second[r], left},
                         {PeerTransfer::Kind::send, torch::full({3}, static_cast<float>(r)), right},
                         {PeerTransfer::Kind::send, torch::full({3}, 100.f + static_cast<float>(r)), left},
                         {PeerTransfer::Kind::send, torch::full({1}, 7.f * static_cast<float>(r)), right}})
        .wait();
  });
  CHECK(errors == no_errors(n));
  for (int64_t r = 0; r < n; ++r) {
    const auto left = static_cast<float>((r + n - 1) % n), right = static_cast<float>((r + 1) % n);
    CHECK(torch::equal(from_left[r], torch::full({3}, left)));
    CHECK(torch::equal(from_right[r], torch::full({3}, 100.f + right)));
    CHECK(torch::equal(second[r], torch::full({1}, 7.f * left)));  // the second send to a peer matches its second recv
  }
}

TEST_CASE("deadlock_free_order: with each peer the lower rank sends first", "[parallel][comm]") {
  auto kinds = [](const std::vector<PeerTransfer>& order) {
    std::vector<std::pair<int64_t, char>> out;
    for (const auto& t : order) out.emplace_back(t.peer, t.kind == PeerTransfer::Kind::send ? 's' : 'r');
    return out;
  };
  const std::vector<PeerTransfer> batch = {{PeerTransfer::Kind::recv, torch::Tensor(), 3},
                                           {PeerTransfer::Kind::send, torch::Tensor(), 1},
                                           {PeerTransfer::Kind::recv, torch::Tensor(), 1},
                                           {PeerTransfer::Kind::send, torch::Tensor(), 3}};
  using Order = std::vector<std::pair<int64_t, char>>;
  CHECK(kinds(parallel::deadlock_free_order(batch, 2)) == Order{{1, 'r'}, {1, 's'}, {3, 's'}, {3, 'r'}});
  CHECK(kinds(parallel::deadlock_free_order(batch, 0)) == Order{{1, 's'}, {1, 'r'}, {3, 's'}, {3, 'r'}});
}

TEST_CASE("thread comm reports collectives called in different orders, and a rank that never arrives", "[parallel][comm]") {
  auto comms = parallel::make_thread_comms(2, "fsdp");
  auto errors = run_ranks(2, [&](int64_t r) {
    if (r == 0)
      comms[0]->all_gather(torch::empty({12}), torch::zeros({6})).wait();
    else
      comms[1]->reduce_scatter_sum(torch::empty({3}), torch::zeros({6})).wait();
  });
  const std::string order = "all_gather on thread group 'fsdp' (2 ranks): rank 1 called reduce_scatter of 6 elements "
                            "while rank 0 called all_gather of 6 elements";
  CHECK(errors == std::vector<std::string>{order, order});

  auto slow = parallel::make_thread_comms(2, "dp", std::chrono::milliseconds(100));
  errors = run_ranks(2, [&](int64_t r) {
    if (r == 0) slow[0]->all_reduce_sum(torch::zeros({1})).wait();
  });
  CHECK(errors[0] == "all_reduce on thread group 'dp' (2 ranks) did not complete within 100 ms: rank(s) 1 never called it");
  CHECK(errors[1].empty());
}

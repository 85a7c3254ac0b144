// The Comm over a real c10d Gloo backend: on one rank, the flat collectives (all_gather and
// reduce_scatter over the tensor-level c10d calls) return what their contract says; on 3 and 4
// ranks (threads of this process over one in-memory store, each with its own Gloo backend),
// all-to-all with uneven and zero splits and batched send/recv in a ring give what the
// in-process Comm gives; each group's clock times what its own collectives kept a rank waiting.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/torch.h>

#include "parallel/process_groups.h"
#include "rank_threads.h"
#include "uneven_all_to_all.h"

using namespace xtrain;

TEST_CASE("collectives over a one-rank Gloo backend", "[parallel]") {
  auto options = c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(30));
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  auto backend = c10::make_intrusive<c10d::ProcessGroupGloo>(c10::make_intrusive<c10d::HashStore>(), 0, 1, options);
  auto comm = parallel::make_backend_comm(backend, "world", {0}, std::chrono::seconds(30));
  CHECK(comm->size() == 1);
  CHECK(comm->name() == "world");
  auto t = torch::arange(6, torch::kFloat32);
  auto gathered = torch::empty({6});
  comm->all_gather(gathered, t * 3).wait();
  CHECK(torch::equal(gathered, t * 3));
  auto reduced = torch::empty({6});
  comm->reduce_scatter_sum(reduced, t + 2).wait();
  CHECK(torch::equal(reduced, t + 2));
  auto sum = torch::tensor({1.25}, torch::kFloat64);
  comm->all_reduce_sum(sum).wait();
  CHECK(sum.item<double>() == 1.25);
  CHECK_THROWS_WITH(comm->all_gather(torch::empty({5}), t), Catch::Contains("size * in.numel()"));
}

namespace {

// Rank r's Comm over a Gloo backend of `ranks` ranks meeting in `store`; every rank must call it
// at the same time (the backend connects to all its peers). The tests keep each rank's comm until
// every rank has finished and tear them down one by one on the main thread: a Gloo backend torn
// down while a peer in the same process still runs collectives can crash that peer's loop.
std::shared_ptr<parallel::Comm> gloo_comm(const c10::intrusive_ptr<c10d::Store>& store, int64_t rank, int64_t ranks) {
  auto options = c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(30));
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  auto backend = c10::make_intrusive<c10d::ProcessGroupGloo>(store, static_cast<int>(rank), static_cast<int>(ranks),
                                                            options);
  std::vector<int64_t> members;
  for (int64_t r = 0; r < ranks; ++r) members.push_back(r);
  return parallel::make_backend_comm(backend, "ep", members, std::chrono::seconds(30));
}

}  // namespace

TEST_CASE("Gloo all-to-all with uneven and zero splits, over 3 ranks", "[parallel][comm]") {
  const testing::UnevenAllToAll uneven;
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<torch::Tensor> out(uneven.kRanks);
  std::vector<std::shared_ptr<parallel::Comm>> comms(uneven.kRanks);
  auto errors = testing::run_ranks(uneven.kRanks, [&](int64_t r) {
    comms[r] = gloo_comm(store, r, uneven.kRanks);
    out[r] = uneven.run(*comms[r], r);
  });
  CHECK(errors == std::vector<std::string>(uneven.kRanks, ""));
  for (int64_t r = 0; r < uneven.kRanks; ++r) CHECK(torch::equal(out[r], uneven.expected(r)));
}

TEST_CASE("Gloo batched send and recv in a ring, over 4 ranks", "[parallel][comm]") {
  const int64_t n = 4;
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<torch::Tensor> from_left(n), from_right(n);
  std::vector<std::shared_ptr<parallel::Comm>> comms(n);
  auto errors = testing::run_ranks(n, [&](int64_t r) {
    auto& comm = comms[r] = gloo_comm(store, r, n);
    const int64_t right = (r + 1) % n, left = (r + n - 1) % n;
    from_left[r] = torch::empty({3});
    from_right[r] = torch::empty({3});
    using Kind = parallel::PeerTransfer::Kind;
    comm->send_recv({{Kind::recv, from_left[r], left},
                     {Kind::recv, from_right[r], right},
                     {Kind::send, torch::full({3}, static_cast<float>(r)), right},
                     {Kind::send, torch::full({3}, 100.f + static_cast<float>(r)), left}})
        .wait();
  });
  CHECK(errors == std::vector<std::string>(n, ""));
  for (int64_t r = 0; r < n; ++r) {
    CHECK(torch::equal(from_left[r], torch::full({3}, static_cast<float>((r + n - 1) % n))));
    CHECK(torch::equal(from_right[r], torch::full({3}, 100.f + static_cast<float>((r + 1) % n))));
  }
}

// Each group times what its own collectives kept this rank waiting: rank 0 waits for rank 1, which
// comes half a second late, and rank 1 (threads here, so a process-wide clock would mix the two)
// hardly waits. An all-gather made of one broadcast per rank counts its wait once.
TEST_CASE("each group's clock counts the time its collectives blocked this rank", "[parallel][comm]") {
  const int64_t n = 2;
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<double> blocked(n), idle_group(n);
  std::vector<std::shared_ptr<parallel::Comm>> comms(n);
  auto errors = testing::run_ranks(n, [&](int64_t r) {
    auto& comm = comms[r] = gloo_comm(store, r, n);
    auto unused = parallel::make_single_process_comm("self");
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    auto gathered = torch::empty({2 * 3});
    comm->all_gather(gathered, torch::full({3}, static_cast<float>(r))).wait();
    blocked[r] = comm->blocked_seconds();
    idle_group[r] = unused->blocked_seconds();
  });
  CHECK(errors == std::vector<std::string>(n, ""));
  CHECK(blocked[0] >= 0.45);
  CHECK(blocked[0] < 0.9);  // once, not once per broadcast
  CHECK(blocked[1] < 0.45);
  CHECK(idle_group == std::vector<double>(n, 0.0));
}

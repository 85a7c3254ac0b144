// A started all-to-all's backward overlaps (parallel/autograd_collectives.h), over 2 ranks of
// real Gloo backends (threads of this process): two exchanges are started in forward, as
// Domino-EP starts part 1's while part 0 computes. In backward, rank 0 holds its part-0
// backward until rank 1 has part 1's gradients back. That can only happen if rank 0 started
// part 1's reverse exchange before part 0's backward, without waiting for it; a synchronous
// backward would stall here, and the test reports that instead of hanging.
#include <chrono>
#include <future>
#include <vector>

#include <catch2/catch.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/torch.h>

#include "parallel/autograd_collectives.h"
#include "parallel/process_groups.h"
#include "rank_threads.h"

using namespace xtrain;

TEST_CASE("a started all-to-all's backward runs while later work computes", "[parallel][moe]") {
  constexpr int64_t kRanks = 2;
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::promise<void> part1_back_on_rank1;
  auto part1_back = part1_back_on_rank1.get_future().share();
  bool overlapped = false;
  parallel::BlockedClock backward_clock;
  std::vector<torch::Tensor> grads0(kRanks), grads1(kRanks);
  // Torn down on this thread once both ranks are done: a Gloo backend torn down while its peer
  // in this process still exchanges can crash the peer.
  std::vector<std::shared_ptr<parallel::Comm>> comms(kRanks);

  const auto errors = testing::run_ranks(kRanks, [&](int64_t r) {
    auto options = c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(30));
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    auto backend = c10::make_intrusive<c10d::ProcessGroupGloo>(store, static_cast<int>(r), kRanks, options);
    auto& comm = comms[r] = parallel::make_backend_comm(backend, "ep", {0, 1}, std::chrono::seconds(30));
    const std::vector<int64_t> splits = {2, 3};  // rank r sends 2 rows to rank 0 and 3 to rank 1
    const std::vector<int64_t> arriving = {splits[static_cast<size_t>(r)], splits[static_cast<size_t>(r)]};
    const auto leaf0 = torch::randn({5, 3}).requires_grad_(true), leaf1 = torch::randn({5, 3}).requires_grad_(true);
    const auto x0 = leaf0 * 1, x1 = leaf1 * 1;
    auto part0 = parallel::start_all_to_all_rows(comm, x0, splits, arriving, &backward_clock);
    auto part1 = parallel::start_all_to_all_rows(comm, x1, splits, arriving, &backward_clock);
    part0.pending.wait();
    const auto y0 = part0.rows * 2;
    y0.register_hook([&, r](const torch::Tensor&) {  // part 0's backward is about to run
      if (r == 0) overlapped = part1_back.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
    });
    x1.register_hook([&, r](const torch::Tensor&) {
      if (r == 1) part1_back_on_rank1.set_value();
    });
    part1.pending.wait();
    const auto y1 = part1.rows * 3;
    (y0.sum() + y1.sum()).backward();
    grads0[r] = leaf0.grad();
    grads1[r] = leaf1.grad();
  });
  REQUIRE(errors == std::vector<std::string>(kRanks, ""));
  CHECK(overlapped);
  for (int64_t r = 0; r < kRanks; ++r) {  // every row came back with its part's factor
    CHECK(torch::equal(grads0[r], torch::full({5, 3}, 2.f)));
    CHECK(torch::equal(grads1[r], torch::full({5, 3}, 3.f)));
  }
  CHECK(backward_clock.seconds() > 0);
}

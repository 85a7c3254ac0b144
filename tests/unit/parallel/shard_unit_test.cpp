#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "parallel/comm.h"
#include "parallel/shard_unit.h"
#include "parallel/thread_comm.h"
#include "rank_threads.h"

using namespace xtrain;

// A single-process sharding group: the unit keeps everything, and its pieces are the whole
// parameters, viewing the same memory the module uses.
TEST_CASE("an unsharded unit: parameters and gradients are views of the shard", "[parallel]") {
  auto a = torch::arange(6, torch::kFloat32).view({2, 3}).requires_grad_(true);
  auto b = torch::full({4}, 7.0f).requires_grad_(true);
  parallel::ShardUnit unit("u", {{"a", a}, {"b", b}}, parallel::make_single_process_comm("fsdp"),
                       parallel::make_single_process_comm("dp"));
  CHECK(unit.numel() == 10);
  CHECK(unit.shard_numel() == 10);
  auto& pieces = unit.parameters();
  REQUIRE(pieces.size() == 2);
  CHECK(pieces[0].name == "a");
  CHECK(pieces[0].shape == std::vector<int64_t>{2, 3});
  CHECK(pieces[1].begin == 0);
  CHECK(torch::equal(pieces[1].local, torch::full({4}, 7.0f)));
  {
    torch::NoGradGuard no_grad;
    pieces[0].local.add_(1);  // what the optimizer does
  }
  CHECK(torch::equal(a, torch::arange(1, 7, torch::kFloat32).view({2, 3})));

  (a * 2).sum().backward();
  (a * 3).sum().backward();  // a second micro batch accumulates
  unit.start_reduce(true);
  unit.finish_reduce();
  CHECK(torch::equal(unit.shard_grad().narrow(0, 0, 6), torch::full({6}, 5.0f)));
  CHECK(torch::equal(pieces[0].local.grad(), torch::full({6}, 5.0f)));
  unit.zero_shard_grad();
  CHECK(a.grad().abs().sum().item<float>() == 0.0f);
}

// A MoE block takes its stacked experts apart with unbind, and autograd saves those views for
// backward: reshard must still free the gathered buffer, and the views must read the values of
// the next gather.
TEST_CASE("a sharded unit's reshard frees the gathered buffer that saved views hold, and they read the next gather",
          "[parallel]") {
  parallel::ThreadWorld world;
  const auto errors = testing::run_ranks(2, [&](int64_t rank) {
    auto experts = torch::arange(12, torch::kFloat32).view({3, 4}).requires_grad_(true);
    parallel::ShardUnit unit("experts", {{"experts", experts}}, world.make_group(rank, "fsdp", {0, 1}),
                             parallel::make_single_process_comm("dp"));
    unit.wait_gather();
    const auto rows = torch::ones({2, 4});
    const auto expert = experts.unbind(0)[1];  // a view of the gathered buffer
    const auto loss = rows.mm(expert.unsqueeze(1)).sum();  // saves the view for backward
    CHECK(expert.storage().nbytes() >= 12 * sizeof(float));
    unit.reshard();
    CHECK(expert.storage().nbytes() == 0);  // freed although the view is alive
    unit.wait_gather();
    unit.prepare_gradients();
    CHECK(torch::equal(expert, torch::arange(4, 8, torch::kFloat32)));
    loss.backward();
    unit.start_reduce(true);
    unit.finish_reduce();
    // Each rank's backward gave expert 1 a gradient of 2 a column; the reduction sums the ranks.
    const auto expected = torch::tensor({0.f, 0.f, 0.f, 0.f, 4.f, 4.f, 4.f, 4.f, 0.f, 0.f, 0.f, 0.f});
    CHECK(torch::equal(unit.shard_grad(), expected.narrow(0, 6 * rank, 6)));
  });
  CHECK(errors == std::vector<std::string>{"", ""});
}

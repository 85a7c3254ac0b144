// Expert parallelism over thread ranks: every rank's MoE block, holding only its experts and
// dispatching its tokens by all-to-all, computes what one block holding every expert computes on
// that rank's tokens: outputs, input gradients and expert gradients (the router's summed over
// ranks). Also when a rank has no tokens, when a rank's experts receive none, and with the
// tokens exchanged in overlapping parts (Domino-EP).
#include <cmath>
#include <map>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include "model/layers/moe.h"
#include "model/layers/parameter_init.h"
#include "model/layers/parameter_source.h"
#include "parallel/expert_dispatch.h"
#include "parallel/thread_comm.h"
#include "rank_threads.h"
#include "tensor_compare.h"

using namespace xtrain;

namespace {

model::MoeBlock seeded_block(const model::MoeOptions& options) {
  model::MoeBlock block(options);
  model::InitPlan plan;
  block->describe_init("mlp", 0.3, 0.2, plan);
  model::materialize(*block, [&](const std::string& name, int64_t begin, int64_t count) {
    return model::initial_values(plan.at("mlp." + name), 13, name, begin, count);
  });
  return block;
}

}  // namespace

TEST_CASE("expert parallelism over 2 and 4 ranks computes one block's outputs and gradients", "[parallel][moe]") {
  const int64_t ranks = GENERATE(2, 4);
  // starved: the last rank's experts are never chosen (their bias is -100), so it receives no rows;
  // and rank 0 has no tokens of its own.
  const bool starved = GENERATE(false, true);
  // Domino-EP: the tokens in parts whose exchanges overlap (3 parts: some of them empty).
  const int64_t parts = GENERATE(1, 2, 3);
  INFO("ranks = " << ranks << ", starved = " << starved << ", parts = " << parts);
  model::MoeOptions options;
  options.hidden_size = 12;
  options.num_experts = 8;
  options.top_k = 2;
  options.intermediate_size = 10;
  options.router = starved ? model::Router::sigmoid_bias : model::Router::softmax;
  const int64_t local = options.num_experts / ranks;

  torch::manual_seed(4);
  std::vector<torch::Tensor> inputs, grad_outs;
  for (int64_t r = 0; r < ranks; ++r) {
    const int64_t tokens = starved && r == 0 ? 0 : 7 + 5 * r;  // uneven on purpose
    inputs.push_back(torch::randn({tokens, options.hidden_size}));
    grad_outs.push_back(torch::randn({tokens, options.hidden_size}));
  }
  auto set_bias = [&](model::MoeBlock& block) {
    if (!starved) return;
    torch::NoGradGuard no_grad;
    block->expert_bias.zero_();
    block->expert_bias.narrow(0, options.num_experts - local, local).fill_(-100.0);
  };

  // One block with every expert, on each rank's tokens in turn.
  auto reference = seeded_block(options);
  set_bias(reference);
  std::vector<torch::Tensor> expected_y, expected_dx;
  for (int64_t r = 0; r < ranks; ++r) {
    const auto x = inputs[r].clone().requires_grad_(true);
    const auto y = reference(x);
    (y * grad_outs[r]).sum().backward();
    expected_y.push_back(y.detach());
    expected_dx.push_back(x.grad());
  }

  parallel::ThreadWorld threads;
  std::vector<model::MoeBlock> blocks;
  std::vector<torch::Tensor> ys(ranks), dxs(ranks);
  std::vector<int64_t> received(ranks, 0);
  for (int64_t r = 0; r < ranks; ++r) blocks.push_back(seeded_block(options));
  std::vector<int64_t> all(ranks);
  for (int64_t r = 0; r < ranks; ++r) all[r] = r;
  const auto errors = testing::run_ranks(ranks, [&](int64_t r) {
    auto& block = blocks[r];
    set_bias(block);
    auto dispatcher = std::make_shared<parallel::ExpertDispatcher>(threads.make_group(r, "ep", all), options.num_experts,
                                                                   parts);
    parallel::shard_experts(*block, dispatcher);
    const auto x = inputs[r].clone().requires_grad_(true);
    const auto y = block(x);
    (y * grad_outs[r]).sum().backward();
    ys[r] = y.detach();
    dxs[r] = x.grad().defined() ? x.grad() : torch::zeros_like(x);
  });
  REQUIRE(errors == std::vector<std::string>(ranks, ""));

  auto router_grad = torch::zeros_like(reference->gate_weight);
  for (int64_t r = 0; r < ranks; ++r) {
    INFO("rank " << r);
    if (inputs[r].size(0) > 0) {
      CHECK(testing::max_relative_error(ys[r], expected_y[r]) < 1e-5);
      CHECK(testing::max_relative_error(dxs[r], expected_dx[r]) < 1e-5);
    } else {
      CHECK(ys[r].size(0) == 0);
    }
    CHECK(blocks[r]->gate_up_proj.size(0) == local);
    for (const auto& [mine, whole] : {std::pair{blocks[r]->gate_up_proj, reference->gate_up_proj},
                                       std::pair{blocks[r]->down_proj, reference->down_proj}}) {
      const auto want = whole.grad().narrow(0, r * local, local);
      if (starved && r == ranks - 1)
        CHECK(mine.grad().abs().max().item<double>() == 0.0);  // its experts saw no rows
      else
        CHECK(testing::max_relative_error(mine.grad(), want) < 1e-5);
    }
    router_grad += blocks[r]->gate_weight.grad();
  }
  // The router is replicated: its gradients, summed over the ranks, are the one block's.
  CHECK(testing::max_relative_error(router_grad, reference->gate_weight.grad()) < 1e-5);
}

// Tensor parallelism of a MoE block over thread ranks (model/layers/moe.h): each tp rank holds E / tp
// experts and a slice of the shared experts, routes every token with the replicated router and
// sums its experts' outputs with the others'. Against one block holding everything: the routing,
// the outputs, the input gradients, the router's gradient (whole on every rank, a router loss
// counted once) and each rank's slices of the expert gradients, with and without sequence
// parallelism, and with expert parallelism splitting each tp rank's experts over 2 data ranks.
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include "model/layers/moe.h"
#include "model/layers/parameter_init.h"
#include "model/layers/parameter_source.h"
#include "parallel/expert_dispatch.h"
#include "parallel/tensor_parallel_plan.h"
#include "parallel/thread_comm.h"
#include "rank_threads.h"
#include "tensor_compare.h"

using namespace xtrain;

namespace {

model::MoeBlock seeded_tp_moe_block(const model::MoeOptions& options) {
  model::MoeBlock block(options);
  model::InitPlan plan;
  block->describe_init("mlp", 0.3, 0.2, plan);
  model::materialize(*block, [&](const std::string& name, int64_t begin, int64_t count) {
    return model::initial_values(plan.at("mlp." + name), 17, name, begin, count);
  });
  return block;
}

// The block's forward and a loss with a router term, as a MoE layer attaches its router losses.
torch::Tensor tp_moe_loss(model::MoeBlock& block, const torch::Tensor& x, const torch::Tensor& grad_out,
                          torch::Tensor& y, torch::Tensor& experts) {
  model::Routing routing;
  y = block->forward(x, &routing);
  experts = routing.experts;
  return (y * grad_out).sum() + 0.1 * model::router_z_loss(model::routing_stats(routing));
}

void narrow_parameter(torch::Tensor& parameter, int64_t dim, int64_t first, int64_t count) {
  torch::NoGradGuard no_grad;
  parameter.set_data(parameter.narrow(dim, first, count).contiguous());
}

}  // namespace

TEST_CASE("a MoE block split over tensor-parallel ranks by expert computes the whole block", "[parallel][tp][moe]") {
  const auto layout = GENERATE(std::pair<int64_t, int64_t>{2, 1}, std::pair<int64_t, int64_t>{4, 1},
                               std::pair<int64_t, int64_t>{2, 2});
  const auto [tp, ep] = layout;
  const bool sequence_parallel = GENERATE(false, true);
  const auto router = GENERATE(model::Router::softmax, model::Router::sigmoid_bias);
  INFO("tp = " << tp << ", ep = " << ep << ", sequence parallel = " << sequence_parallel
               << ", router = " << to_string(router));
  model::MoeOptions options;
  options.hidden_size = 12;
  options.num_experts = 8;
  options.top_k = 2;
  options.intermediate_size = 6;
  options.router = router;
  options.num_shared_experts = 2;
  options.shared_expert_gate = true;
  const int64_t batch = 2, sequence = 8, held = options.num_experts / tp, local = held / ep;
  const int64_t shared_width = options.intermediate_size * options.num_shared_experts / tp, seq_part = sequence / tp;

  // One block with everything, on each data rank's tokens in turn (the gradients add up).
  torch::manual_seed(9);
  auto reference = seeded_tp_moe_block(options);
  std::vector<torch::Tensor> inputs, grad_outs, want_y, want_dx, want_experts;
  for (int64_t d = 0; d < ep; ++d) {
    inputs.push_back(torch::randn({batch, sequence, options.hidden_size}));
    grad_outs.push_back(torch::randn({batch, sequence, options.hidden_size}));
    const auto x = inputs.back().clone().requires_grad_(true);
    torch::Tensor y, experts;
    tp_moe_loss(reference, x, grad_outs.back(), y, experts).backward();
    want_y.push_back(y.detach());
    want_dx.push_back(x.grad());
    want_experts.push_back(experts);
  }

  const int64_t world = tp * ep;
  std::vector<model::MoeBlock> blocks;
  for (int64_t w = 0; w < world; ++w) blocks.push_back(seeded_tp_moe_block(options));
  std::vector<torch::Tensor> ys(world), dxs(world), routed(world);
  parallel::ThreadWorld threads;
  const auto errors = testing::run_ranks(world, [&](int64_t w) {
    const int64_t d = w / tp, t = w % tp;
    std::vector<int64_t> tp_ranks, ep_ranks;
    for (int64_t i = 0; i < tp; ++i) tp_ranks.push_back(d * tp + i);
    for (int64_t i = 0; i < ep; ++i) ep_ranks.push_back(i * tp + t);
    auto& block = blocks[w];
    narrow_parameter(block->gate_up_proj, 0, t * held, held);
    narrow_parameter(block->down_proj, 0, t * held, held);
    narrow_parameter(block->shared_experts->gate_proj->weight, 0, t * shared_width, shared_width);
    narrow_parameter(block->shared_experts->up_proj->weight, 0, t * shared_width, shared_width);
    narrow_parameter(block->shared_experts->down_proj->weight, 1, t * shared_width, shared_width);
    block->use_tensor_parallel(parallel::make_tensor_parallel_ops(
        threads.make_group(w, "tp" + std::to_string(d), tp_ranks), sequence_parallel));
    if (ep > 1)
      parallel::shard_experts(*block, std::make_shared<parallel::ExpertDispatcher>(
                                          threads.make_group(w, "ep" + std::to_string(t), ep_ranks), held));
    const auto mine = sequence_parallel ? inputs[d].narrow(1, t * seq_part, seq_part) : inputs[d];
    const auto x = mine.clone().requires_grad_(true);
    const auto g = sequence_parallel ? grad_outs[d].narrow(1, t * seq_part, seq_part) : grad_outs[d];
    torch::Tensor y;
    tp_moe_loss(block, x, g, y, routed[w]).backward();
    ys[w] = y.detach();
    dxs[w] = x.grad();
  });
  REQUIRE(errors == std::vector<std::string>(world, ""));

  for (int64_t t = 0; t < tp; ++t) {
    auto router_grad = torch::zeros_like(reference->gate_weight);
    auto gate_grad = torch::zeros_like(reference->shared_expert_gate->weight);
    auto shared_grad = torch::zeros({shared_width, options.hidden_size});
    for (int64_t d = 0; d < ep; ++d) {
      const int64_t w = d * tp + t;
      INFO("tp rank " << t << ", data rank " << d);
      auto part = [&](const torch::Tensor& whole) {
        return sequence_parallel ? whole.narrow(1, t * seq_part, seq_part) : whole;
      };
      CHECK(torch::equal(routed[w], want_experts[d]));
      CHECK(testing::max_relative_error(ys[w], part(want_y[d])) < 1e-5);
      CHECK(testing::max_relative_error(dxs[w], part(want_dx[d])) < 1e-5);
      const int64_t first = t * held + d * local;
      CHECK(testing::max_relative_error(blocks[w]->gate_up_proj.grad(),
                                        reference->gate_up_proj.grad().narrow(0, first, local)) < 1e-5);
      CHECK(testing::max_relative_error(blocks[w]->down_proj.grad(),
                                        reference->down_proj.grad().narrow(0, first, local)) < 1e-5);
      router_grad += blocks[w]->gate_weight.grad();
      gate_grad += blocks[w]->shared_expert_gate->weight.grad();
      shared_grad += blocks[w]->shared_experts->up_proj->weight.grad();
    }
    // Replicated over tp, whole on each tp rank; over the data ranks they add up as any weight's.
    CHECK(testing::max_relative_error(router_grad, reference->gate_weight.grad()) < 1e-5);
    CHECK(testing::max_relative_error(gate_grad, reference->shared_expert_gate->weight.grad()) < 1e-5);
    CHECK(testing::max_relative_error(
              shared_grad, reference->shared_experts->up_proj->weight.grad().narrow(0, t * shared_width, shared_width)) <
          1e-5);
  }
}

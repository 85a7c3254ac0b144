// The dropless MoE block against transformers' Qwen3-MoE block (tools/reference/moe_block.py):
// output, router logits, the load-balancing loss (transformers' is top_k times xtrain's
// normalised one) and every gradient; and the z-loss and the loss statistics on their own.
#include <cstdlib>

#include <fmt/format.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "ckpt/safetensors.h"
#include "model/layers/moe.h"
#include "model/layers/parameter_init.h"
#include "model/layers/parameter_source.h"
#include "scratch_dir.h"
#include "tensor_compare.h"

using namespace xtrain;

namespace {

struct MoeGoldenRun {
  model::MoeBlock block{nullptr};
  torch::Tensor x, grad_out;
  ckpt::TensorMap golden;
};

// The block with seeded weights (and, with the sigmoid router, a random expert bias), and the
// reference's outputs for it from tools/reference/moe_block.py.
MoeGoldenRun golden_run(const model::MoeOptions& options, const std::string& reference_args) {
  MoeGoldenRun run;
  run.block = model::MoeBlock(options);
  model::InitPlan plan;
  run.block->describe_init("mlp", 0.3, 0.2, plan);
  model::materialize(*run.block, [&](const std::string& name, int64_t begin, int64_t count) {
    return model::initial_values(plan.at("mlp." + name), 5, name, begin, count);
  });
  torch::manual_seed(9);
  if (run.block->expert_bias.defined()) run.block->expert_bias.copy_(torch::randn({options.num_experts}) * 0.1);
  run.x = torch::randn({40, options.hidden_size});
  run.grad_out = torch::randn({40, options.hidden_size});
  testing::ScratchDir scratch;
  const std::string in = (scratch.path() / "in.safetensors").string(), out = (scratch.path() / "out.safetensors").string();
  ckpt::TensorMap inputs{{"x", run.x}, {"grad_out", run.grad_out}};
  for (const auto& item : run.block->named_parameters()) inputs[item.key()] = item.value().detach();
  for (const auto& item : run.block->named_buffers()) inputs[item.key()] = item.value();
  ckpt::save_safetensors(in, inputs);
  const std::string command =
      fmt::format("{} {}/tools/reference/moe_block.py --inputs {} --out {} --experts {} --top-k {} --intermediate {} "
                  "{} {}",
                  XTRAIN_PYTHON, XTRAIN_SOURCE_DIR, in, out, options.num_experts, options.top_k,
                  options.intermediate_size, options.norm_topk_prob ? "" : "--no-norm-topk-prob", reference_args);
  REQUIRE(std::system(command.c_str()) == 0);
  run.golden = ckpt::load_safetensors(out).tensors;
  return run;
}

// The worst relative error of the output and of every gradient of sum(y * grad_out) (+ the
// load-balancing loss, times top_k as transformers scales it, with aux).
std::pair<double, double> compare(MoeGoldenRun& run, const model::MoeOptions& options, bool aux) {
  const auto input = run.x.clone().requires_grad_(true);
  model::Routing routing;
  const auto y = run.block(input, &routing);
  auto loss = (y * run.grad_out).sum();
  if (aux) loss = loss + model::load_balancing_loss(model::routing_stats(routing), options.top_k) * options.top_k;
  loss.backward();
  CHECK(testing::max_relative_error(routing.logits.detach(), run.golden.at("logits")) < 1e-6);
  const double y_error = testing::max_relative_error(y.detach(), run.golden.at("y"));
  CHECK(y_error < 1e-5);
  double grad_error = testing::max_relative_error(input.grad(), run.golden.at("grad.x"));
  CHECK(grad_error < 1e-5);
  int64_t compared = 0;
  for (const auto& item : run.block->named_parameters()) {
    INFO(item.key());
    const double error = testing::max_relative_error(item.value().grad(), run.golden.at("grad." + item.key()));
    CHECK(error < 1e-5);
    grad_error = std::max(grad_error, error);
    ++compared;
  }
  int64_t golden_gradients = 0;
  for (const auto& [name, tensor] : run.golden) golden_gradients += name.rfind("grad.", 0) == 0 ? 1 : 0;
  CHECK(compared + 1 == golden_gradients);  // transformers' block has exactly these parameters (and x)
  return {y_error, grad_error};
}

}  // namespace

TEST_CASE("the MoE block computes transformers' Qwen3-MoE block: output, aux loss, gradients", "[model][moe]") {
  const bool norm_topk = GENERATE(true, false);
  INFO("norm_topk_prob = " << norm_topk);
  model::MoeOptions options;
  options.hidden_size = 16;
  options.num_experts = 8;
  options.top_k = 2;
  options.intermediate_size = 12;
  options.norm_topk_prob = norm_topk;
  auto run = golden_run(options, "");
  {
    torch::NoGradGuard no_grad;
    model::Routing routing;
    run.block(run.x, &routing);
    const auto stats = model::routing_stats(routing);
    const double aux = model::load_balancing_loss(stats, options.top_k).item<double>();
    const double aux_error = std::abs(aux * options.top_k - run.golden.at("aux").item<double>()) /
                             run.golden.at("aux").item<double>();
    CHECK(aux_error < 1e-6);
    CHECK(stats.counts.sum().item<double>() == 80.0);  // every token to top_k experts
    fmt::print("MoE block against transformers' Qwen3MoeSparseMoeBlock (norm_topk_prob {}): load-balancing loss "
               "{:.2e}, ",
               norm_topk, aux_error);
  }
  const auto [y_error, grad_error] = compare(run, options, /*aux=*/true);
  fmt::print("output {:.2e}, gradients {:.2e} (worst relative errors)\n", y_error, grad_error);
}

TEST_CASE("the sigmoid router with expert bias, groups, scaling and shared experts computes transformers' "
          "DeepSeek-V3 MoE block",
          "[model][moe]") {
  model::MoeOptions options;
  options.hidden_size = 16;
  options.num_experts = 8;
  options.top_k = 3;
  options.intermediate_size = 12;
  options.router = model::Router::sigmoid_bias;
  options.n_group = 4;
  options.topk_group = 2;
  options.routed_scaling_factor = 2.5;
  options.num_shared_experts = 1;
  auto run = golden_run(options, "--deepseek-v3 --n-group 4 --topk-group 2 --scaling 2.5 --shared 1");
  const auto [y_error, grad_error] = compare(run, options, /*aux=*/false);
  fmt::print("MoE block against transformers' DeepseekV3MoE (bias, 2 of 4 groups, scaling 2.5, a shared expert): "
             "output {:.2e}, gradients {:.2e} (worst relative errors)\n",
             y_error, grad_error);
  // The bias chooses but does not weigh: with it zero, other experts are chosen.
  model::Routing biased, plain;
  {
    torch::NoGradGuard no_grad;
    biased = run.block->route(run.x);
    run.block->expert_bias.zero_();
    plain = run.block->route(run.x);
  }
  CHECK_FALSE(torch::equal(std::get<0>(biased.experts.sort(-1)), std::get<0>(plain.experts.sort(-1))));
}

TEST_CASE("the expert bias moves toward balance by the sign of each expert's load", "[model][moe]") {
  model::MoeOptions options;
  options.hidden_size = 4;
  options.num_experts = 4;
  options.top_k = 1;
  options.intermediate_size = 4;
  options.router = model::Router::sigmoid_bias;
  model::MoeBlock block(options);
  block->update_expert_bias(torch::tensor({10.0f, 2.0f, 4.0f, 0.0f}), 0.01);  // mean 4
  CHECK(torch::allclose(block->expert_bias, torch::tensor({-0.01f, 0.01f, 0.0f, 0.01f})));
  model::MoeOptions softmax = options;
  softmax.router = model::Router::softmax;
  CHECK_THROWS(model::MoeBlock(softmax)->update_expert_bias(torch::ones({4}), 0.01));
}

TEST_CASE("MoE losses: balance is 1 for a uniform router, z-loss is the mean squared logsumexp", "[model][moe]") {
  model::Routing uniform;
  uniform.logits = torch::zeros({6, 3});
  uniform.probs = torch::full({6, 3}, 1.0 / 3);
  uniform.experts = torch::tensor({0, 1, 2, 0, 1, 2}, torch::kInt64).reshape({6, 1});
  uniform.weights = torch::ones({6, 1});
  const auto stats = model::routing_stats(uniform);
  CHECK(model::load_balancing_loss(stats, 1).item<double>() == Approx(1.0));
  CHECK(model::router_z_loss(stats).item<double>() == Approx(std::log(3.0) * std::log(3.0)));
  // All tokens on one expert that also takes all the probability: E times worse.
  model::Routing collapsed = uniform;
  collapsed.probs = torch::tensor({1.0f, 0.0f, 0.0f}).repeat({6, 1});
  collapsed.experts = torch::zeros({6, 1}, torch::kInt64);
  CHECK(model::load_balancing_loss(model::routing_stats(collapsed), 1).item<double>() == Approx(3.0));
}

TEST_CASE("a capacity drops each expert's choices over it, by router weight or by position", "[model][moe]") {
  const auto policy = GENERATE(model::DropPolicy::probs, model::DropPolicy::position);
  INFO("drop policy " << to_string(policy));
  model::MoeOptions options;
  options.hidden_size = 6;
  options.num_experts = 3;
  options.top_k = 1;
  options.intermediate_size = 5;
  model::MoeBlock dropless(options);
  model::InitPlan plan;
  dropless->describe_init("mlp", 0.5, 0.3, plan);
  const auto source = [&](const std::string& name, int64_t begin, int64_t count) {
    return model::initial_values(plan.at("mlp." + name), 3, name, begin, count);
  };
  model::materialize(*dropless, source);
  options.capacity_factor = 1.0;  // ceil(1.0 x 12 tokens x 1 / 3 experts) = 4 per expert
  options.drop_policy = policy;
  model::MoeBlock capped(options);
  model::materialize(*capped, source);

  torch::manual_seed(2);
  const auto x = torch::randn({12, options.hidden_size}) + torch::randn({1, options.hidden_size}) * 2;  // skewed
  model::Routing routing, capped_routing;
  const auto full = dropless(x, &routing);
  const auto y = capped(x, &capped_routing);
  // Which tokens each expert keeps, computed here from the routing alone.
  auto kept = torch::zeros({12}, torch::kBool);
  int64_t dropped = 0;
  for (int64_t e = 0; e < 3; ++e) {
    const auto mine = routing.experts.reshape(-1).eq(e).nonzero().reshape(-1);  // in token order
    if (mine.numel() <= 4) {
      kept.index_fill_(0, mine, true);
      continue;
    }
    dropped += mine.numel() - 4;
    const auto keep = policy == model::DropPolicy::position ? mine.narrow(0, 0, 4)
                                           : mine.index_select(0, std::get<1>(routing.weights.reshape(-1)
                                                                                   .index_select(0, mine)
                                                                                   .topk(4)));
    kept.index_fill_(0, keep, true);
  }
  REQUIRE(dropped > 0);
  CHECK(capped_routing.dropped == dropped);
  CHECK(model::routing_stats(capped_routing).dropped == static_cast<double>(dropped));
  // A kept token computes what it does without a capacity; a dropped one adds nothing.
  const auto expected = torch::where(kept.unsqueeze(-1), full, torch::zeros_like(full));
  CHECK(testing::max_relative_error(y, expected) < 1e-6);
}

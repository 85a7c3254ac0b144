// The dropless MoE block against transformers' Qwen3-MoE block (tools/reference/moe_block.py):
// output, router logits, the load-balancing loss (transformers' is top_k times xtrain's
// normalised one) and every gradient; and the z-loss and the loss statistics on their own.
#include <cstdlib>

#include <fmt/format.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "ckpt/safetensors.h"
#include "model/moe.h"
#include "model/parameter_init.h"
#include "model/parameter_source.h"
#include "scratch_dir.h"
#include "tensor_compare.h"

using namespace xtrain;

TEST_CASE("the MoE block computes transformers' Qwen3-MoE block: output, aux loss, gradients", "[model][moe]") {
  const bool norm_topk = GENERATE(true, false);
  INFO("norm_topk_prob = " << norm_topk);
  const model::MoeOptions options{16, 8, 2, 12, norm_topk};
  model::MoeBlock block(options);
  model::InitPlan plan;
  block->describe_init("mlp", 0.3, 0.2, plan);
  model::materialize(*block, [&](const std::string& name, int64_t begin, int64_t count) {
    return model::initial_values(plan.at("mlp." + name), 5, name, begin, count);
  });
  torch::manual_seed(9);
  const auto x = torch::randn({40, 16});
  const auto grad_out = torch::randn({40, 16});

  testing::ScratchDir scratch;
  const std::string in = (scratch.path() / "in.safetensors").string(), out = (scratch.path() / "out.safetensors").string();
  ckpt::TensorMap inputs{{"x", x}, {"grad_out", grad_out}};
  for (const auto& item : block->named_parameters()) inputs[item.key()] = item.value().detach();
  ckpt::save_safetensors(in, inputs);
  const std::string command = fmt::format("{} {}/tools/reference/moe_block.py --inputs {} --out {} --experts 8 --top-k 2 "
                                          "--intermediate 12 {}",
                                          XTRAIN_PYTHON, XTRAIN_SOURCE_DIR, in, out, norm_topk ? "" : "--no-norm-topk-prob");
  REQUIRE(std::system(command.c_str()) == 0);
  const auto golden = ckpt::load_safetensors(out).tensors;

  const auto input = x.clone().requires_grad_(true);
  model::Routing routing;
  const auto y = block(input, &routing);
  const auto stats = model::routing_stats(routing);
  const auto aux = model::load_balancing_loss(stats, options.top_k);
  ((y * grad_out).sum() + aux * static_cast<double>(options.top_k)).backward();

  const double logits_error = testing::max_relative_error(routing.logits.detach(), golden.at("logits"));
  const double y_error = testing::max_relative_error(y.detach(), golden.at("y"));
  const double aux_error = std::abs(aux.item<double>() * options.top_k - golden.at("aux").item<double>()) /
                           golden.at("aux").item<double>();
  CHECK(logits_error < 1e-6);
  CHECK(y_error < 1e-5);
  CHECK(aux_error < 1e-6);
  double grad_error = testing::max_relative_error(input.grad(), golden.at("grad.x"));
  CHECK(grad_error < 1e-5);
  for (const auto& item : block->named_parameters()) {
    INFO(item.key());
    const double error = testing::max_relative_error(item.value().grad(), golden.at("grad." + item.key()));
    CHECK(error < 1e-5);
    grad_error = std::max(grad_error, error);
  }
  fmt::print("MoE block against transformers' Qwen3MoeSparseMoeBlock (norm_topk_prob {}): worst relative error: "
             "logits {:.2e}, output {:.2e}, load-balancing loss {:.2e}, gradients {:.2e}\n",
             norm_topk, logits_error, y_error, aux_error, grad_error);
  // Every token went to top_k experts; a balanced router would give a loss of 1.
  CHECK(stats.counts.sum().item<double>() == 80.0);
  CHECK(aux.item<double>() > 0.5);
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

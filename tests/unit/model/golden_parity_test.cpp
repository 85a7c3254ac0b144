// Golden parity with the PyTorch reference (tools/reference, HF conventions): the same
// weights, written by xtrain as an HF folder, give the same logits, loss, gradients and
// AdamW trajectory in both implementations.
#include <catch2/catch.hpp>

#include <cstdlib>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ckpt/hf_llama.h"
#include "ckpt/safetensors.h"
#include "model/llama.h"
#include "model/small_llama.h"
#include "optim/adamw.h"
#include "optim/grad_clip.h"
#include "scratch_dir.h"

using namespace xtrain;

namespace {

double relative_error(const torch::Tensor& actual, const torch::Tensor& expected) {
  auto a = actual.to(torch::kFloat64), e = expected.to(torch::kFloat64);
  return (a - e).abs().max().item<double>() / std::max(e.abs().max().item<double>(), 1e-30);
}


}  // namespace

TEST_CASE("logits, loss, gradients and AdamW steps match the PyTorch reference", "[model][golden]") {
  const bool tied = GENERATE(false, true);
  INFO("tie_embeddings = " << tied);
  testing::ScratchDir scratch;
  const std::string dir = (scratch.path() / "model").string();
  torch::manual_seed(11);
  model::LlamaForCausalLM llama(testing::SmallLlama{97, 64, 2, 4, 2, 160, 32, tied}.config());
  ckpt::save_hf_folder(dir, llama, 96);
  auto tokens = torch::randint(0, 97, {2, 25}, torch::kInt64);
  const std::string tokens_path = (scratch.path() / "tokens.safetensors").string();
  const std::string out_path = (scratch.path() / "golden.safetensors").string();
  ckpt::save_safetensors(tokens_path, {{"input_ids", tokens}});

  const int steps = 3;
  const double lr = 1e-3, weight_decay = 0.1, clip = 1.0;
  const std::string command = fmt::format(
      "{} {}/tools/reference/golden.py --checkpoint {} --tokens {} --out {} --train-steps {} "
      "--lr {} --betas 0.9 0.95 --eps 1e-8 --weight-decay {} --grad-clip {} --threads 1",
      XTRAIN_PYTHON, XTRAIN_SOURCE_DIR, dir, tokens_path, out_path, steps, lr, weight_decay, clip);
  REQUIRE(std::system(command.c_str()) == 0);
  auto golden = ckpt::load_safetensors(out_path).tensors;

  // Forward and backward at the saved weights.
  auto inputs = tokens.narrow(1, 0, 24);
  CHECK(relative_error(llama(inputs).detach(), golden.at("logits")) < 1e-5);
  auto loss = model::next_token_loss(llama, tokens);
  CHECK(relative_error(loss.detach(), golden.at("loss")) < 1e-5);
  loss.backward();
  int64_t compared = 0;
  for (const auto& item : llama->named_parameters()) {
    INFO(item.key());
    CHECK(relative_error(item.value().grad(), golden.at("grad." + item.key())) < 1e-5);
    ++compared;
  }
  CHECK(compared == (tied ? 20 : 21));

  // The same optimizer trajectory: clip + AdamW with decay only on matrices.
  std::vector<optim::NamedParameter> parameters;
  for (const auto& item : llama->named_parameters())
    parameters.push_back({item.key(), item.value(), model::decays(item.key(), item.value())});
  optim::AdamW adamw(parameters, {0.9, 0.95, 1e-8, weight_decay});
  auto golden_losses = golden.at("train_losses");
  for (int step = 0; step < steps; ++step) {
    for (auto& p : llama->parameters()) p.mutable_grad() = torch::Tensor();
    auto step_loss = model::next_token_loss(llama, tokens);
    step_loss.backward();
    CHECK(std::abs(step_loss.item<double>() - golden_losses[step].item<double>()) <
          1e-5 * std::abs(golden_losses[step].item<double>()));
    optim::clip_grad_norm(llama->parameters(), clip);
    adamw.step(lr);
  }
  for (const auto& item : llama->named_parameters()) {
    INFO(item.key());
    CHECK(relative_error(item.value().detach(), golden.at("final." + item.key())) < 1e-5);
  }
}

TEST_CASE("an HF folder written by xtrain loads back into an identical model", "[model][ckpt]") {
  testing::ScratchDir scratch;
  torch::manual_seed(3);
  model::LlamaForCausalLM llama(testing::SmallLlama{97, 64, 2, 4, 2, 160, 32, false}.config());
  ckpt::save_hf_folder(scratch.path().string(), llama, 96);
  auto loaded = ckpt::load_hf_folder(scratch.path().string());
  auto input = torch::randint(0, 97, {1, 9}, torch::kInt64);
  CHECK(torch::equal(llama(input), loaded(input)));
}

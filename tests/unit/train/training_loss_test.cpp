#include <torch/torch.h>

#include "config/recipe_loader.h"
#include "memory/memory_policy.h"
#include "model/llama.h"
#include "model/small_llama.h"
#include "train/training_loss.h"

// Catch after torch: c10 defines a CHECK macro of its own.
#include <catch2/catch.hpp>
#include "tensor_compare.h"

using namespace xtrain;

namespace {

struct LossAndGrads {
  torch::Tensor loss;
  std::map<std::string, torch::Tensor> grads;
};

LossAndGrads run(int64_t chunk, const memory::MemoryOptions& options = {}) {
  torch::manual_seed(5);
  model::LlamaForCausalLM llama(testing::SmallLlama{300, 32, 2, 4, 2, 64, 40}.config());
  memory::apply_memory_policy(llama, options);
  auto tokens = torch::randint(0, 300, {2, 38}, torch::kInt64);
  auto loss = train::training_loss(llama, tokens, chunk);
  loss.backward();
  LossAndGrads out{loss.detach(), {}};
  for (const auto& item : llama->named_parameters()) out.grads[item.key()] = item.value().grad().clone();
  return out;
}

}  // namespace

TEST_CASE("the chunked training loss equals the plain one, with its gradients", "[train][memory]") {
  const auto plain = run(0);
  for (int64_t chunk : {1, 7, 74, 1000}) {
    INFO("chunk " << chunk);
    const auto chunked = run(chunk);
    CHECK(xtrain::testing::max_relative_error(chunked.loss, plain.loss) < 1e-6);
    for (const auto& [name, grad] : plain.grads) {
      INFO(name);
      CHECK(xtrain::testing::max_relative_error(chunked.grads.at(name), grad) < 1e-6);
    }
  }
}

TEST_CASE("blockwise attention in the model matches the naive kernel", "[train][memory]") {
  const auto naive = run(0);
  memory::MemoryOptions blockwise;
  blockwise.attention = "blockwise";
  blockwise.attention_block_size = 8;
  const auto tiled = run(0, blockwise);
  CHECK(xtrain::testing::max_relative_error(tiled.loss, naive.loss) < 1e-5);
  for (const auto& [name, grad] : naive.grads) {
    INFO(name);
    CHECK(xtrain::testing::max_relative_error(tiled.grads.at(name), grad) < 1e-5);
  }
}

TEST_CASE("memory.chunked_loss resolves to tokens per chunk", "[train][memory]") {
  auto chunk = [](const std::string& value) {
    config::LoadOptions options;
    options.overrides = {"memory.chunked_loss=" + value};
    return train::loss_chunk_tokens(config::load_recipe_text("name: x\n", "r.yaml", options));
  };
  CHECK(chunk("off") == 0);
  CHECK(chunk("512") == 512);
  CHECK(chunk("auto") == 8 * 256);  // a 257-token vocabulary fits the whole micro batch in one chunk
  config::LoadOptions bad;
  bad.overrides = {"memory.chunked_loss=lots"};
  CHECK_THROWS_WITH(config::load_recipe_text("name: x\n", "r.yaml", bad),
                    "--set memory.chunked_loss=lots: memory.chunked_loss: expected auto, off or a positive number of "
                    "tokens per chunk, got 'lots'");
}

#include <torch/torch.h>

#include "config/recipe_loader.h"
#include "memory/memory_policy.h"
#include "model/causal_lm.h"
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

// A batch as the loader delivers it: inputs and next-token targets [2, 37], with the targets of
// a prompt (the first 5 positions of row 0) and of the padding after a document (the last 9 of
// row 1) set to -100.
struct Batch {
  torch::Tensor inputs, targets;
};

Batch make_batch() {
  torch::manual_seed(6);
  auto tokens = torch::randint(0, 300, {2, 38}, torch::kInt64);
  Batch batch{tokens.narrow(1, 0, 37).clone(), tokens.narrow(1, 1, 37).clone()};
  batch.targets[0].narrow(0, 0, 5).fill_(-100);
  batch.targets[1].narrow(0, 28, 9).fill_(-100);
  return batch;
}

// loss_of(model, batch) under chunk, memory policy and a freshly seeded model.
template <typename LossOf>
LossAndGrads run(const LossOf& loss_of, const memory::MemoryOptions& options = {}) {
  torch::manual_seed(5);
  auto llama = testing::SmallLlama{300, 32, 2, 4, 2, 64, 40}.build(5);
  memory::apply_memory_policy(*llama, options);
  auto loss = loss_of(*llama, make_batch());
  loss.backward();
  LossAndGrads out{loss.detach(), {}};
  for (const auto& item : llama->named_parameters()) out.grads[item.key()] = item.value().grad().clone();
  return out;
}

// The loss as the trainer computes it.
LossAndGrads training_run(int64_t chunk, const memory::MemoryOptions& options = {}) {
  return run([chunk](model::CausalLM& llama, const Batch& batch) {
    return train::training_loss(llama, train::model_batch(batch.inputs, batch.targets, {}, torch::kCPU), chunk).loss;
  }, options);
}

// The reference: LibTorch's own mean cross-entropy over the full logits, -100 ignored.
LossAndGrads reference_run() {
  return run([](model::CausalLM& llama, const Batch& batch) {
    auto logits = testing::logits(llama, batch.inputs);
    namespace F = torch::nn::functional;
    return F::cross_entropy(logits.reshape({-1, logits.size(-1)}), batch.targets.reshape({-1}),
                            F::CrossEntropyFuncOptions().ignore_index(-100));
  });
}

void require_close(const LossAndGrads& actual, const LossAndGrads& expected, double tolerance) {
  CHECK(xtrain::testing::max_relative_error(actual.loss, expected.loss) < tolerance);
  for (const auto& [name, grad] : expected.grads) {
    INFO(name);
    CHECK(xtrain::testing::max_relative_error(actual.grads.at(name), grad) < tolerance);
  }
}

}  // namespace

TEST_CASE("the training loss, chunked or not, is the mean cross-entropy over counted targets", "[train][memory]") {
  const auto reference = reference_run();
  for (int64_t chunk : {0, 1, 7, 74, 1000}) {
    INFO("chunk " << chunk);
    require_close(training_run(chunk), reference, 1e-6);
  }
}

TEST_CASE("a batch without counted targets has loss 0 and zero gradients, chunked or not", "[train][memory]") {
  for (int64_t chunk : {0, 7}) {
    INFO("chunk " << chunk);
    const auto empty = run([chunk](model::CausalLM& llama, const Batch& batch) {
      const auto none = torch::full_like(batch.targets, -100);
      return train::training_loss(llama, train::model_batch(batch.inputs, none, {}, torch::kCPU), chunk).loss;
    });
    CHECK(empty.loss.item<double>() == 0.0);
    for (const auto& [name, grad] : empty.grads) {
      INFO(name);
      CHECK(grad.abs().max().item<double>() == 0.0);
    }
  }
}

TEST_CASE("blockwise attention in the model matches the naive kernel", "[train][memory]") {
  memory::MemoryOptions blockwise;
  blockwise.attention = memory::Attention::blockwise;
  blockwise.attention_block_size = 8;
  require_close(training_run(0, blockwise), training_run(0), 1e-5);
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

#include <torch/torch.h>

#include "config/recipe_loader.h"
#include "device/host_tensor_memory.h"
#include "layout/activation_memory.h"
#include "train/precision.h"
#include "memory/memory_policy.h"
#include "model/causal_lm.h"
#include "model/kernels/widened_gemm.h"
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

// What the planner counts for the loss (layout::loss_bytes) is what the engine's loss holds at its
// peak, measured by the counting allocator over forward and backward, in fp32 and under bf16
// autocast as the trainer runs them (train::PrecisionScope). Unchunked, the log-softmax's backward
// holds its saved output, its incoming gradient and its input's gradient, three fp32 copies of the
// logits; chunked, one fp32 chunk, its bf16 copy under autocast and the gradient of the loss's
// input. Beside it the planner counts the unsharded head's fp32 gradient (4 B a parameter); what
// is left are head-sized buffers of the chunked path under autocast (the head's bf16 copy, each
// chunk's bf16 weight-gradient product, the .grad the sum lands in: 2% of this loss), hence 5%. The bf16 GEMMs run as ATen runs them (a GPU's way): widened on a CPU without bf16
// kernels (model/kernels/widened_gemm.h), they would hold fp32 copies of their operands too.
TEST_CASE("the loss's peak memory is the planner's count of it, chunked or not", "[train][memory][layout]") {
  util::track_host_tensor_memory();
  constexpr int64_t kVocab = 4096, kHidden = 8, kTokens = 2048;
  for (const auto dtype : {config::Dtype::fp32, config::Dtype::bf16}) {
    for (const int64_t chunk : {int64_t{0}, int64_t{512}}) {
      INFO((dtype == config::Dtype::fp32 ? "fp32" : "bf16") << ", chunk " << chunk);
      torch::manual_seed(3);
      auto llama = testing::SmallLlama{kVocab, kHidden, 1, 2, 1, 16, kTokens}.build(5);
      const auto hidden = torch::randn({1, kTokens, kHidden}).requires_grad_();
      const auto labels = torch::randint(0, kVocab, {1, kTokens});
      const double element = static_cast<double>(c10::elementSize(train::compute_type(dtype)));
      const int64_t before = util::host_tensor_bytes();
      util::reset_peak_host_tensor_bytes();
      {
        const model::Bf16GemmWideningScope aten_gemms(false);
        const train::PrecisionScope precision(dtype);
        train::next_token_loss_of_hidden(*llama, hidden, labels, chunk).backward();
      }
      const double held = static_cast<double>(util::peak_host_tensor_bytes() - before);
      const double head_gradient = 4.0 * kVocab * kHidden;
      const double counted = layout::loss_bytes(kTokens, static_cast<double>(chunk), kVocab, kHidden, 1, element);
      INFO("held " << held << " B, the head's gradient " << head_gradient << " B, counted " << counted << " B");
      CHECK(std::abs(held - head_gradient - counted) / counted < 0.05);
    }
  }
}

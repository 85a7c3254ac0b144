#include <malloc.h>

#include <torch/torch.h>

#include "memory/activation_offload.h"
#include "memory/memory_policy.h"
#include "memory/recompute.h"
#include "model/small_llama.h"

// Catch after torch: c10 defines a CHECK macro of its own.
#include <catch2/catch.hpp>

using namespace xtrain;

namespace {

// Gradients of one forward/backward of a freshly seeded model under a memory policy.
std::map<std::string, torch::Tensor> gradients(const memory::MemoryOptions& options,
                                               std::vector<std::string>* events = nullptr) {
  torch::manual_seed(21);
  auto llama = testing::SmallLlama{50, 32, 4, 4, 2, 64, 16}.build(21);
  auto offloader = memory::apply_memory_policy(*llama, options);
  auto tokens = torch::randint(0, 50, {3, 17}, torch::kInt64);
  if (offloader) offloader->begin_forward();
  auto loss = model::next_token_loss(*llama, tokens);
  if (offloader) CHECK(offloader->resident_slots() == 4);  // one slot per block
  loss.backward();
  if (offloader) {
    CHECK(offloader->resident_slots() == 0);
    if (events) *events = offloader->events();
  }
  std::map<std::string, torch::Tensor> grads;
  for (const auto& item : llama->named_parameters()) grads[item.key()] = item.value().grad().clone();
  return grads;
}

void require_identical(const std::map<std::string, torch::Tensor>& a, const std::map<std::string, torch::Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (const auto& [name, grad] : a) {
    INFO(name);
    CHECK(torch::equal(grad, b.at(name)));  // bit-identical, not close
  }
}

// Heap bytes in use (glibc's arenas and mmapped blocks, where LibTorch's CPU tensors live).
int64_t heap_bytes_in_use() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
}

// What one forward/backward under a policy does: how often each block and each attention
// kernel ran, and the heap bytes the forward left held for backward.
struct PolicyTrace {
  std::vector<int> block_runs, attention_runs;
  int64_t saved_bytes = 0;
};

PolicyTrace trace(const memory::MemoryOptions& options) {
  torch::manual_seed(21);
  const testing::SmallLlama shape{50, 64, 4, 4, 2, 256, 128};
  auto llama = shape.build(21);
  PolicyTrace result;
  result.block_runs.assign(shape.layers, 0);
  result.attention_runs.assign(shape.layers, 0);
  // Counting kernels go in before the policy, so that a selective policy wraps them.
  const auto kernels = llama->attention_kernels();
  for (int64_t i = 0; i < shape.layers; ++i) {
    *kernels[i] =
        [&result, i](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     const model::SequenceLayout& layout, const model::AttentionVariant& variant) {
          ++result.attention_runs[i];
          return model::causal_attention(q, k, v, layout.cu_seqlens, variant);
        };
  }
  auto offloader = memory::apply_memory_policy(*llama, options);
  // The counting block goes in after it: the policy's runner calls it for the forward and
  // again for each replay in backward.
  const model::BlockRunner installed = llama->block_runner;
  llama->block_runner = [&result, installed](int64_t layer, const torch::Tensor& x,
                                                   const std::function<torch::Tensor(const torch::Tensor&)>& block) {
    auto counted = [&result, layer, block](const torch::Tensor& in) {
      ++result.block_runs[layer];
      return block(in);
    };
    return installed ? installed(layer, x, counted) : counted(x);
  };
  auto tokens = torch::randint(0, 50, {4, 128}, torch::kInt64);
  if (offloader) offloader->begin_forward();
  const int64_t before = heap_bytes_in_use();
  auto loss = model::next_token_loss(*llama, tokens);
  result.saved_bytes = heap_bytes_in_use() - before;
  loss.backward();
  return result;
}

}  // namespace

TEST_CASE("recompute replays the blocks it covers and keeps less for backward", "[memory]") {
  const PolicyTrace plain = trace({memory::Recompute::none, 1.0, false});
  CHECK(plain.block_runs == std::vector<int>{1, 1, 1, 1});
  CHECK(plain.attention_runs == std::vector<int>{1, 1, 1, 1});
  const PolicyTrace full = trace({memory::Recompute::full, 1.0, false});
  CHECK(full.block_runs == std::vector<int>{2, 2, 2, 2});
  CHECK(full.attention_runs == std::vector<int>{2, 2, 2, 2});
  const PolicyTrace half = trace({memory::Recompute::full, 0.5, false});
  CHECK(half.block_runs == std::vector<int>{2, 2, 1, 1});
  const PolicyTrace selective = trace({memory::Recompute::selective, 1.0, false});
  CHECK(selective.block_runs == std::vector<int>{1, 1, 1, 1});
  CHECK(selective.attention_runs == std::vector<int>{2, 2, 2, 2});
  const PolicyTrace offloaded = trace({memory::Recompute::full, 1.0, true});
  CHECK(offloaded.block_runs == std::vector<int>{2, 2, 2, 2});

  // Each block of the plain run keeps its norms, projections, MLP activations and [4, 4, 128,
  // 128] attention probabilities; a recomputed one keeps its [4, 128, 64] input. The logits and
  // the loss's own buffers are the same in all runs. (An offloaded input stays in the host heap
  // on a CPU run, so only a GPU run shows what offload saves.)
  INFO("saved for backward: none " << plain.saved_bytes << " B, full " << full.saved_bytes << " B, half "
                                   << half.saved_bytes << " B, selective " << selective.saved_bytes << " B");
  CHECK(full.saved_bytes < plain.saved_bytes / 3);
  CHECK(half.saved_bytes < plain.saved_bytes * 3 / 4);
  CHECK(half.saved_bytes > full.saved_bytes);
  CHECK(selective.saved_bytes < plain.saved_bytes * 3 / 4);
}

TEST_CASE("recompute and offload give bit-identical gradients in fp32", "[memory]") {
  const auto plain = gradients({memory::Recompute::none, 1.0, false});
  SECTION("full") { require_identical(plain, gradients({memory::Recompute::full, 1.0, false})); }
  SECTION("full, half of the blocks") { require_identical(plain, gradients({memory::Recompute::full, 0.5, false})); }
  SECTION("selective") { require_identical(plain, gradients({memory::Recompute::selective, 1.0, false})); }
  SECTION("full with offload") { require_identical(plain, gradients({memory::Recompute::full, 1.0, true})); }
}

TEST_CASE("offloaded block inputs leave in forward order and come back one block ahead", "[memory]") {
  std::vector<std::string> events;
  gradients({memory::Recompute::full, 1.0, true}, &events);
  CHECK(events == std::vector<std::string>{
                      "offload 0", "offload 1", "offload 2", "offload 3",                //
                      "prefetch 3", "fetch 3", "release 3", "prefetch 2",               //
                      "fetch 2", "release 2", "prefetch 1",                             //
                      "fetch 1", "release 1", "prefetch 0",                             //
                      "fetch 0", "release 0"});
}

TEST_CASE("recompute keeps no reference to an offloaded input", "[memory]") {
  auto fn = [](const std::vector<torch::Tensor>& in) { return (in[0] * 2).sin(); };
  auto x = torch::randn({4, 4}, torch::requires_grad());
  memory::ActivationOffloader offloader;
  offloader.begin_forward();
  auto y = memory::recompute(fn, {x}, &offloader);
  CHECK(x.storage().use_count() == 1);  // only x itself: the device copy can be freed
  auto kept = memory::recompute(fn, {x});
  CHECK(x.storage().use_count() == 2);  // without offload the saved input shares it
  (y.sum() + kept.sum()).backward();
  CHECK(torch::allclose(x.grad(), 2 * 2 * (x * 2).cos()));
}

TEST_CASE("recompute is a plain call without grad mode", "[memory]") {
  torch::NoGradGuard no_grad;
  auto x = torch::randn({3});
  auto y = memory::recompute([](const std::vector<torch::Tensor>& in) { return in[0] + 1; }, {x});
  CHECK_FALSE(y.requires_grad());
  CHECK(torch::equal(y, x + 1));
}

TEST_CASE("selective recompute of an attention kernel with sinks gives the sinks their gradient",
          "[memory][recompute][variant]") {
  torch::manual_seed(23);
  const auto q = torch::randn({2, 4, 12, 8}), k = torch::randn({2, 2, 12, 8}), v = torch::randn({2, 2, 12, 6});
  const auto sinks = torch::randn({4}), w = torch::randn({2, 4, 12, 6});
  const auto layout = model::packed_layout(torch::tensor(std::vector<int64_t>{0, 5, 12}, torch::kInt64));
  // Gradients of q, k, v and the sinks through `kernel`, and how often the inner kernel ran.
  auto run = [&](const model::AttentionKernel& kernel) {
    std::vector<torch::Tensor> leaves;
    for (const auto& t : {q, k, v, sinks}) leaves.push_back(t.clone().requires_grad_(true));
    // A non-leaf sink, as a tensor-parallel rank's slice of its heads would be.
    const model::AttentionVariant variant{0.3, 4, leaves[3] * 1.0};
    (kernel(leaves[0], leaves[1], leaves[2], layout, variant) * w).sum().backward();
    std::vector<torch::Tensor> grads;
    for (const auto& leaf : leaves) grads.push_back(leaf.grad());
    return grads;
  };
  int runs = 0;
  const model::AttentionKernel eager = [&runs](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                               const model::SequenceLayout& layout,
                                               const model::AttentionVariant& variant) {
    ++runs;
    return model::causal_attention(q, k, v, layout.cu_seqlens, variant);
  };
  const auto expected = run(eager);
  runs = 0;
  const auto replayed = run(memory::recomputed_kernel(eager));
  CHECK(runs == 2);  // forward, and the replay in backward
  for (size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    REQUIRE(replayed[i].defined());
    CHECK(torch::equal(replayed[i], expected[i]));
  }
  // The empty kernel (causal_attention) recomputed too.
  const auto empty = run(memory::recomputed_kernel({}));
  CHECK(torch::equal(empty[3], expected[3]));
}

#include <torch/torch.h>

#include "memory/activation_offload.h"
#include "memory/memory_policy.h"
#include "memory/recompute.h"
#include "model/llama.h"
#include "model/small_llama.h"

// Catch after torch: c10 defines a CHECK macro of its own.
#include <catch2/catch.hpp>

using namespace xtrain;

namespace {

// Gradients of one forward/backward of a freshly seeded model under a memory policy.
std::map<std::string, torch::Tensor> gradients(const memory::MemoryOptions& options,
                                               std::vector<std::string>* events = nullptr) {
  torch::manual_seed(21);
  model::LlamaForCausalLM llama(testing::SmallLlama{50, 32, 4, 4, 2, 64, 16}.config());
  auto offloader = memory::apply_memory_policy(llama, options);
  auto tokens = torch::randint(0, 50, {3, 17}, torch::kInt64);
  if (offloader) offloader->begin_forward();
  auto loss = model::next_token_loss(llama, tokens);
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

}  // namespace

TEST_CASE("recompute and offload give bit-identical gradients in fp32", "[memory]") {
  const auto plain = gradients({"none", 1.0, false});
  SECTION("full") { require_identical(plain, gradients({"full", 1.0, false})); }
  SECTION("full, half of the blocks") { require_identical(plain, gradients({"full", 0.5, false})); }
  SECTION("selective") { require_identical(plain, gradients({"selective", 1.0, false})); }
  SECTION("full with offload") { require_identical(plain, gradients({"full", 1.0, true})); }
}

TEST_CASE("offloaded block inputs leave in forward order and come back one block ahead", "[memory]") {
  std::vector<std::string> events;
  gradients({"full", 1.0, true}, &events);
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

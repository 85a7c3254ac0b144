#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "memory/chunked_loss.h"
#include "model/gradcheck.h"
#include "tensor_compare.h"

using xtrain::memory::chunked_cross_entropy;

namespace {

constexpr int64_t kTokens = 23, kHidden = 16, kVocab = 37;

// Random hidden states, output weight and targets, drawn in that order from `seed`.
struct Problem {
  torch::Tensor hidden, weight, targets;
};

Problem random_problem(uint64_t seed) {
  torch::manual_seed(seed);
  auto hidden = torch::randn({kTokens, kHidden});
  auto weight = torch::randn({kVocab, kHidden});
  auto targets = torch::randint(kVocab, {kTokens});
  return {hidden, weight, targets};
}

struct LossAndGrads {
  torch::Tensor loss, grad_hidden, grad_weight;
};

// Runs loss(hidden, weight) forward and backward on fresh leaves.
template <typename Loss>
LossAndGrads run(const torch::Tensor& hidden, const torch::Tensor& weight, Loss loss_fn) {
  auto h = hidden.detach().clone().requires_grad_(true);
  auto w = weight.detach().clone().requires_grad_(true);
  auto loss = loss_fn(h, w);
  loss.backward();
  return {loss.detach(), h.grad(), w.grad()};
}

// The reference: materialise all logits, then cross_entropy.
LossAndGrads reference(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& targets,
                       int64_t ignore_index = -100) {
  return run(hidden, weight, [&](const torch::Tensor& h, const torch::Tensor& w) {
    return torch::nn::functional::cross_entropy(
        torch::mm(h, w.t()), targets, torch::nn::functional::CrossEntropyFuncOptions().ignore_index(ignore_index));
  });
}

LossAndGrads chunked(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& targets,
                     int64_t chunk_tokens, int64_t ignore_index = -100) {
  return run(hidden, weight, [&](const torch::Tensor& h, const torch::Tensor& w) {
    return chunked_cross_entropy(h, w, targets, chunk_tokens, ignore_index);
  });
}

void check_matches(const LossAndGrads& actual, const LossAndGrads& expected) {
  CHECK(actual.loss.scalar_type() == torch::kFloat32);
  CHECK(xtrain::testing::norm_relative_error(actual.loss, expected.loss) < 1e-6);
  CHECK(xtrain::testing::norm_relative_error(actual.grad_hidden, expected.grad_hidden) < 1e-6);
  CHECK(xtrain::testing::norm_relative_error(actual.grad_weight, expected.grad_weight) < 1e-6);
}

}  // namespace

TEST_CASE("chunked cross-entropy equals the unchunked loss and gradients", "[memory]") {
  const Problem problem = random_problem(0);
  const auto &hidden = problem.hidden, &weight = problem.weight, &targets = problem.targets;
  const auto expected = reference(hidden, weight, targets);
  // 7 does not divide 23: the last chunk is short. kTokens + 5 is one oversized chunk.
  for (int64_t chunk : {int64_t{1}, int64_t{7}, kTokens, kTokens + 5}) {
    INFO("chunk_tokens = " << chunk);
    check_matches(chunked(hidden, weight, targets, chunk), expected);
  }
}

TEST_CASE("chunked cross-entropy skips ignored targets", "[memory]") {
  torch::manual_seed(1);
  auto hidden = torch::randn({kTokens, kHidden});
  auto weight = torch::randn({kVocab, kHidden});

  SECTION("default ignore_index, including a whole ignored chunk") {
    auto targets = torch::randint(kVocab, {kTokens});
    targets.narrow(0, 7, 7).fill_(-100);
    targets[0] = -100;
    targets[kTokens - 1] = -100;
    const auto expected = reference(hidden, weight, targets);
    for (int64_t chunk : {int64_t{1}, int64_t{7}, kTokens}) {
      INFO("chunk_tokens = " << chunk);
      check_matches(chunked(hidden, weight, targets, chunk), expected);
    }
  }

  SECTION("a vocabulary id as ignore_index") {
    auto targets = torch::randint(kVocab, {kTokens});
    targets.narrow(0, 0, 5).fill_(3);
    check_matches(chunked(hidden, weight, targets, 4, /*ignore_index=*/3), reference(hidden, weight, targets, 3));
  }

  SECTION("every target ignored gives a zero loss and zero gradients") {
    auto targets = torch::full({kTokens}, -100, torch::kLong);
    const auto result = chunked(hidden, weight, targets, 5);
    CHECK(result.loss.item<double>() == 0.0);
    CHECK(result.grad_hidden.abs().max().item<double>() == 0.0);
    CHECK(result.grad_weight.abs().max().item<double>() == 0.0);
  }
}

TEST_CASE("chunked cross-entropy scales saved gradients by grad_output", "[memory]") {
  const Problem problem = random_problem(2);
  const auto &hidden = problem.hidden, &weight = problem.weight, &targets = problem.targets;
  const auto expected = reference(hidden, weight, targets);
  const auto scaled = run(hidden, weight, [&](const torch::Tensor& h, const torch::Tensor& w) {
    return chunked_cross_entropy(h, w, targets, 6) * 2.5;
  });
  CHECK(xtrain::testing::norm_relative_error(scaled.grad_hidden, expected.grad_hidden * 2.5) < 1e-6);
  CHECK(xtrain::testing::norm_relative_error(scaled.grad_weight, expected.grad_weight * 2.5) < 1e-6);
}

TEST_CASE("chunked cross-entropy computes only the gradients that are needed", "[memory]") {
  const Problem problem = random_problem(3);
  const auto &hidden = problem.hidden, &weight = problem.weight, &targets = problem.targets;
  const auto expected = reference(hidden, weight, targets);

  SECTION("frozen weight") {
    auto h = hidden.clone().requires_grad_(true);
    chunked_cross_entropy(h, weight, targets, 5).backward();
    CHECK(xtrain::testing::norm_relative_error(h.grad(), expected.grad_hidden) < 1e-6);
    CHECK_FALSE(weight.grad().defined());
  }
  SECTION("frozen hidden") {
    auto w = weight.clone().requires_grad_(true);
    chunked_cross_entropy(hidden, w, targets, 5).backward();
    CHECK(xtrain::testing::norm_relative_error(w.grad(), expected.grad_weight) < 1e-6);
  }
  SECTION("no grad mode") {
    auto h = hidden.clone().requires_grad_(true);
    torch::NoGradGuard no_grad;
    auto loss = chunked_cross_entropy(h, weight, targets, 5);
    CHECK_FALSE(loss.requires_grad());
    CHECK(xtrain::testing::norm_relative_error(loss, expected.loss) < 1e-6);
  }
}

TEST_CASE("WeightGrad: a tied table's gradient goes into its existing .grad, added or summed in place", "[memory]") {
  using xtrain::memory::WeightGrad;
  const Problem problem = random_problem(6);
  const auto ids = torch::randint(kVocab, {kTokens});
  // A tied table: looked up to make the hidden states, then the output projection.
  auto tied_loss = [&](const torch::Tensor& table, WeightGrad target) {
    auto hidden = torch::embedding(table, ids) + problem.hidden;
    return chunked_cross_entropy(hidden, table, problem.targets, 5, -100, {}, {}, target) * 0.75;
  };
  auto plain = problem.weight.clone().requires_grad_(true);
  tied_loss(plain, WeightGrad::to_autograd).backward();

  SECTION("into_existing_grad adds to what .grad holds") {
    auto fused = problem.weight.clone().requires_grad_(true);
    const auto earlier = torch::randn_like(fused);  // a gradient from an earlier micro batch
    fused.mutable_grad() = earlier.clone();
    const auto buffer = fused.grad();
    tied_loss(fused, WeightGrad::into_existing_grad).backward();
    CHECK(fused.grad().data_ptr() == buffer.data_ptr());  // the same buffer, added to in place
    CHECK(xtrain::testing::norm_relative_error(fused.grad() - earlier, plain.grad()) < 1e-6);
  }
  SECTION("into_fresh_grad sums into a zeroed .grad during forward and scales it in backward") {
    auto fused = problem.weight.clone().requires_grad_(true);
    fused.mutable_grad() = torch::zeros_like(fused);
    const auto buffer = fused.grad();
    auto loss = tied_loss(fused, WeightGrad::into_fresh_grad);
    CHECK(buffer.abs().max().item<double>() > 0);  // written by forward, not held elsewhere
    loss.backward();
    CHECK(fused.grad().data_ptr() == buffer.data_ptr());
    // Zeros plus the same sums, then the same scaling: the same bits as autograd's.
    CHECK(torch::equal(fused.grad(), plain.grad()));
  }
  SECTION("without an existing .grad the gradient is handed to autograd as usual") {
    for (const auto target : {WeightGrad::into_existing_grad, WeightGrad::into_fresh_grad}) {
      auto fresh = problem.weight.clone().requires_grad_(true);
      tied_loss(fresh, target).backward();
      CHECK(torch::equal(fresh.grad(), plain.grad()));
    }
  }
}

TEST_CASE("fp64 finite differences: chunked cross-entropy", "[memory][gradcheck]") {
  torch::manual_seed(4);
  auto targets = torch::tensor({2, 0, -100, 5, 1}, torch::kLong);
  auto error = xtrain::testing::max_gradcheck_error(
      [&](const std::vector<torch::Tensor>& in) { return chunked_cross_entropy(in[0], in[1], targets, 2); },
      {torch::randn({5, 4}), torch::randn({6, 4})});
  CHECK(error < 1e-6);
}

TEST_CASE("bf16 chunked cross-entropy stays close to fp32", "[memory]") {
  torch::manual_seed(5);
  auto hidden = torch::randn({kTokens, kHidden});
  auto weight = torch::randn({kVocab, kHidden}) * 0.3;
  auto targets = torch::randint(kVocab, {kTokens});
  const auto expected = reference(hidden, weight, targets);
  const auto result = chunked(hidden.to(torch::kBFloat16), weight.to(torch::kBFloat16), targets, 7);
  CHECK(result.loss.scalar_type() == torch::kFloat32);
  CHECK(xtrain::testing::norm_relative_error(result.loss, expected.loss) < 1e-2);
  CHECK(result.grad_hidden.scalar_type() == torch::kBFloat16);
  CHECK(result.grad_weight.scalar_type() == torch::kBFloat16);
  CHECK(xtrain::testing::norm_relative_error(result.grad_hidden, expected.grad_hidden) < 3e-2);
  CHECK(xtrain::testing::norm_relative_error(result.grad_weight, expected.grad_weight) < 3e-2);
}

TEST_CASE("under bf16 autocast the chunk matmuls take bf16 operands and the loss stays fp32", "[memory]") {
  torch::manual_seed(9);
  auto hidden = torch::randn({10, 8}, torch::requires_grad());
  auto weight = torch::randn({13, 8}, torch::requires_grad());
  auto targets = torch::randint(0, 13, {10}, torch::kInt64);
  // The reference rounds the operands to bf16 and does everything else in fp32.
  auto logits = torch::matmul(hidden.detach().to(torch::kBFloat16), weight.detach().to(torch::kBFloat16).t());
  auto expected = torch::nn::functional::cross_entropy(logits.to(torch::kFloat32), targets);
  at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
  at::autocast::set_autocast_enabled(at::kCPU, true);
  auto loss = xtrain::memory::chunked_cross_entropy(hidden, weight, targets, 4);
  at::autocast::set_autocast_enabled(at::kCPU, false);
  loss.backward();
  CHECK(loss.scalar_type() == torch::kFloat32);
  CHECK(std::abs(loss.item<double>() - expected.item<double>()) < 1e-5);
  CHECK(hidden.grad().scalar_type() == torch::kFloat32);
  CHECK(weight.grad().scalar_type() == torch::kFloat32);
  auto fp32 = xtrain::memory::chunked_cross_entropy(hidden.detach(), weight.detach(), targets, 4);
  CHECK(std::abs(loss.item<double>() - fp32.item<double>()) < 2e-2);
}

// GRPO's loss side against TRL's GRPOTrainer run through its own code (tools/reference/grpo_trl.py):
// on fixed log-probabilities, masks and rewards, the advantages, the loss summed over the
// micro batches of a step, its gradient with respect to the policy's log-probabilities and TRL's
// metrics, within 1e-6, for each loss type offered (grpo, bnpo, dr_grpo, dapo), both ratio
// levels, each reward scale, with and without the old policy and the KL's ratio weighting. The
// micro batches differ in token count, so a normaliser taken from the wrong batch shows.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "ckpt/safetensors.h"
#include "scratch_dir.h"
#include "tensor_compare.h"
#include "train/grpo_loss.h"

using namespace xtrain;

// Named, not anonymous: the unit tests build as unity files.
namespace grpo_loss_test {

constexpr int64_t kGroup = 4, kMaxCompletionLength = 10;

struct Inputs {
  torch::Tensor logps, old_logps, ref_logps, mask, rewards;
};

// 12 completions of 3 prompts (groups of 4, the last one's rewards all equal), up to 8 tokens;
// the first 6 (one micro batch of two) long, the last 6 short.
Inputs make_inputs() {
  torch::manual_seed(2026);
  const std::vector<int64_t> lengths{8, 7, 8, 6, 8, 5, 1, 2, 3, 2, 4, 1};
  const int64_t rows = static_cast<int64_t>(lengths.size()), tokens = 8;
  Inputs in;
  in.mask = torch::arange(tokens).unsqueeze(0).lt(torch::tensor(lengths).unsqueeze(1)).to(torch::kFloat32);
  in.logps = -torch::rand({rows, tokens}) * 3 - 0.05;
  in.old_logps = in.logps + torch::randn({rows, tokens}) * 0.25;  // ratios on both sides of the clip range
  in.ref_logps = in.logps + torch::randn({rows, tokens}) * 0.3;
  in.rewards = torch::tensor({1.0F, 0.0F, 0.5F, 0.25F, 2.0F, -1.0F, 0.0F, 3.0F, 0.5F, 0.5F, 0.5F, 0.5F});
  return in;
}

struct Case {
  std::string name;  // TRL's loss_type
  train::GrpoAggregation aggregation;
  double beta, epsilon_low, epsilon_high;
  train::GrpoRatioLevel level;
  train::GrpoRewardScale scale;
  bool kl_times_ratio, old_given;
  int64_t micro_batches;
};

const std::vector<Case>& cases() {
  using A = train::GrpoAggregation;
  using L = train::GrpoRatioLevel;
  using S = train::GrpoRewardScale;
  static const std::vector<Case> all{
      {"grpo", A::grpo, 0.04, 0.2, 0.28, L::token, S::group, true, true, 2},
      {"bnpo", A::bnpo, 0.04, 0.2, 0.28, L::token, S::group, true, true, 2},
      {"dr_grpo", A::dr_grpo, 0.04, 0.2, 0.28, L::token, S::group, true, true, 2},
      {"dapo", A::dapo, 0.04, 0.2, 0.28, L::token, S::group, true, true, 2},
      {"grpo", A::grpo, 0.0, 0.2, 0.2, L::sequence, S::batch, true, true, 2},
      {"dapo", A::dapo, 0.04, 0.2, 0.2, L::token, S::none, false, false, 1},
  };
  return all;
}

std::string level_name(train::GrpoRatioLevel level) {
  return level == train::GrpoRatioLevel::token ? "token" : "sequence";
}
std::string scale_name(train::GrpoRewardScale scale) {
  return scale == train::GrpoRewardScale::group ? "group" : scale == train::GrpoRewardScale::batch ? "batch" : "none";
}

ckpt::TensorMap run_trl(const Inputs& in) {
  testing::ScratchDir scratch;
  const auto inputs = (scratch.path() / "in.safetensors").string(), out = (scratch.path() / "out.safetensors").string();
  ckpt::save_safetensors(inputs, {{"logps", in.logps},
                                  {"old_logps", in.old_logps},
                                  {"ref_logps", in.ref_logps},
                                  {"mask", in.mask},
                                  {"rewards", in.rewards}});
  std::string command = fmt::format(
      "{} {}/tools/reference/grpo_trl.py --inputs {} --out {} --num-generations {} --max-completion-length {}",
      XTRAIN_PYTHON, XTRAIN_SOURCE_DIR, inputs, out, kGroup, kMaxCompletionLength);
  for (const auto& c : cases())
    command += fmt::format(" --case {}:{}:{}:{}:{}:{}:{}:{}:{}", c.name, c.beta, c.epsilon_low, c.epsilon_high,
                           level_name(c.level), scale_name(c.scale), c.kl_times_ratio ? 1 : 0, c.old_given ? 1 : 0,
                           c.micro_batches);
  REQUIRE(std::system((command + " 2>/dev/null").c_str()) == 0);
  return ckpt::load_safetensors(out).tensors;
}

struct StepResult {
  double loss = 0;
  torch::Tensor grad;
  std::vector<train::GrpoTerms> micro;
};

// The step as xtrain's training loop would take it: the micro batches' terms, each backward.
StepResult run_step(const Inputs& in, const torch::Tensor& advantages, const train::GrpoSettings& settings,
                    int64_t micro_batches, bool old_given, double step_tokens) {
  const auto policy = in.logps.clone().requires_grad_(true);
  const int64_t rows = in.logps.size(0) / micro_batches;
  StepResult result;
  for (int64_t k = 0; k < micro_batches; ++k) {
    const auto part = [&](const torch::Tensor& t) { return t.slice(0, k * rows, (k + 1) * rows); };
    auto terms = train::grpo_loss(part(policy), old_given ? part(in.old_logps) : torch::Tensor(), part(in.ref_logps),
                                  part(advantages), part(in.mask), settings, {micro_batches, step_tokens});
    terms.loss.backward();
    result.loss += terms.loss.item<double>();
    result.micro.push_back(std::move(terms));
  }
  result.grad = policy.grad();
  return result;
}

double metric_difference(const std::vector<std::pair<std::string, torch::Tensor>>& ours, const ckpt::TensorMap& trl,
                         const std::string& prefix, int64_t micro) {
  double worst = 0;
  for (const auto& [name, value] : ours) {
    INFO("metric " << name);
    const auto key = prefix + name;
    REQUIRE(trl.count(key) == 1);
    worst = std::max(worst, std::abs(value.item<double>() - trl.at(key)[micro].item<double>()));
  }
  return worst;
}

TEST_CASE("GRPO advantages, loss, gradient and metrics equal TRL's GRPOTrainer for each loss type", "[train][grpo]") {
  const auto in = make_inputs();
  const auto trl = run_trl(in);
  const double step_tokens = in.mask.sum().item<double>();
  for (size_t i = 0; i < cases().size(); ++i) {
    const auto& c = cases()[i];
    const auto label = fmt::format("{} (beta {}, {} ratios, scale_rewards {}, {} micro batches{}{})", c.name, c.beta,
                                   level_name(c.level), scale_name(c.scale), c.micro_batches,
                                   c.kl_times_ratio ? "" : ", KL not ratio-weighted", c.old_given ? "" : ", on policy");
    INFO(label);
    const auto advantages = train::grpo_advantages(in.rewards, kGroup, c.scale);
    const double advantage_diff =
        testing::max_relative_error(advantages.advantages, trl.at(fmt::format("advantages.{}", i)));
    train::GrpoSettings settings{c.aggregation, c.epsilon_low, c.epsilon_high, c.beta, c.kl_times_ratio, c.level,
                                 kMaxCompletionLength};
    const auto step = run_step(in, advantages.advantages, settings, c.micro_batches, c.old_given, step_tokens);
    const double trl_loss = trl.at(fmt::format("loss.{}", i)).item<double>();
    const double loss_diff = std::abs(step.loss - trl_loss) / std::max(1.0, std::abs(trl_loss));
    const double grad_diff = testing::max_relative_error(step.grad, trl.at(fmt::format("grad.{}", i)));
    double metric_diff = metric_difference(advantages.metrics, trl, fmt::format("metric.{}.", i), 0);
    for (int64_t k = 0; k < c.micro_batches; ++k)
      metric_diff =
          std::max(metric_diff, metric_difference(step.micro[k].metrics, trl, fmt::format("metric.{}.", i), k));
    WARN(fmt::format("{}: loss xtrain {:.9f} TRL {:.9f} (diff {:.2e} relative); gradient max diff {:.2e} relative; "
                     "advantages {:.2e} relative; metrics {:.2e} absolute",
                     label, step.loss, trl_loss, loss_diff, grad_diff, advantage_diff, metric_diff));
    CHECK(advantage_diff <= 1e-6);
    CHECK(loss_diff <= 1e-6);
    CHECK(grad_diff <= 1e-6);
    CHECK(metric_diff <= 1e-6);
    // Not vacuous: the loss and its gradient are far from 0 (the loss is small, as a group's
    // advantages sum to 0: dr_grpo's is 6e-4), and with the old policy's token ratios some tokens
    // are clipped.
    CHECK(std::abs(trl_loss) > 1e-4);
    CHECK(step.grad.abs().max().item<double>() > 1e-3);
    if (c.old_given && c.level == train::GrpoRatioLevel::token)
      CHECK(trl.at(fmt::format("metric.{}.clip_ratio/region_mean", i)).sum().item<double>() > 0);
  }
  // The comparison sees the normaliser: bnpo over the whole batch at once (one micro batch) is
  // not TRL's bnpo over its two micro batches of unequal token counts, nor is dapo's over each
  // micro batch's own tokens.
  const std::vector<std::tuple<size_t, train::GrpoAggregation, double>> wrong_normalisers{
      {1, train::GrpoAggregation::bnpo, step_tokens}, {3, train::GrpoAggregation::dapo, 0.0}};
  for (const auto& [index, aggregation, step_share] : wrong_normalisers) {
    const auto& c = cases()[index];
    const auto advantages = train::grpo_advantages(in.rewards, kGroup, c.scale).advantages;
    const train::GrpoSettings settings{aggregation, c.epsilon_low, c.epsilon_high, c.beta,
                                       true,        c.level,       kMaxCompletionLength};
    const auto wrong = aggregation == train::GrpoAggregation::bnpo
                           ? run_step(in, advantages, settings, 1, true, step_share)
                           : run_step(in, advantages, settings, 2, true, step_share);
    const double grad_diff = testing::max_relative_error(wrong.grad, trl.at(fmt::format("grad.{}", index)));
    WARN(c.name << " with the other batch's normaliser: gradient max diff " << grad_diff << " relative");
    CHECK(grad_diff > 1e-2);
  }
}

TEST_CASE("GRPO refuses inputs of the wrong shapes with the reason", "[train][grpo]") {
  const auto in = make_inputs();
  const auto advantages = train::grpo_advantages(in.rewards, kGroup, train::GrpoRewardScale::group).advantages;
  train::GrpoSettings settings;
  settings.beta = 0.04;
  CHECK_THROWS_WITH(train::grpo_loss(in.logps, {}, {}, advantages, in.mask, settings),
                    "grpo_loss: beta is not 0: the reference's log-probabilities must have the policy's shape");
  settings.aggregation = train::GrpoAggregation::dr_grpo;
  CHECK_THROWS_WITH(train::grpo_loss(in.logps, {}, in.ref_logps, advantages, in.mask, settings),
                    "grpo_loss: dr_grpo divides by max_completion_length, which must be at least 1");
  CHECK_THROWS_WITH(train::grpo_advantages(in.rewards, 5, train::GrpoRewardScale::group),
                    "grpo_advantages: 12 completions do not make groups of 5 (at least 2 completions a prompt)");
}

}  // namespace grpo_loss_test

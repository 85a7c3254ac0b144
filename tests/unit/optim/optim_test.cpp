#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

#include "optim/adamw.h"
#include "optim/grad_clip.h"
#include "optim/lr_schedule.h"
#include "tensor_compare.h"

using namespace xtrain::optim;

TEST_CASE("warmup then cosine, linear and constant decay", "[optim]") {
  LrSchedule schedule{1.0, 0.1, 10, 110, Decay::cosine};
  CHECK(schedule.at(1) == Approx(0.1));
  CHECK(schedule.at(10) == Approx(1.0));
  CHECK(schedule.at(60) == Approx(0.1 + 0.9 * 0.5));
  CHECK(schedule.at(110) == Approx(0.1));
  schedule.decay = Decay::linear;
  CHECK(schedule.at(60) == Approx(0.55));
  CHECK(schedule.at(110) == Approx(0.1));
  schedule.decay = Decay::constant;
  CHECK(schedule.at(100) == Approx(1.0));
  LrSchedule no_warmup{2.0, 0.0, 0, 100, Decay::cosine};
  CHECK(no_warmup.at(1) == Approx(2.0 * 0.5 * (1 + std::cos(M_PI * 0.01))));
}

TEST_CASE("gradient clipping scales to the max norm and reports the norm before", "[optim]") {
  auto a = torch::zeros({2}, torch::requires_grad());
  auto b = torch::zeros({1}, torch::requires_grad());
  a.mutable_grad() = torch::tensor({3.0f, 0.0f});
  b.mutable_grad() = torch::tensor({4.0f});
  CHECK(clip_grad_norm({a, b}, 1.0) == Approx(5.0));
  CHECK(a.grad()[0].item<double>() == Approx(0.6).epsilon(1e-5));
  CHECK(b.grad()[0].item<double>() == Approx(0.8).epsilon(1e-5));
  CHECK(clip_grad_norm({a, b}, 0.0) == Approx(1.0).epsilon(1e-5));  // 0 disables clipping
}

TEST_CASE("AdamW decays only marked parameters and restores its state exactly", "[optim]") {
  auto matrix = torch::ones({2, 2}, torch::requires_grad());
  auto gain = torch::ones({2}, torch::requires_grad());
  AdamW adamw({{"w", matrix, true}, {"g", gain, false}}, {0.9, 0.95, 1e-8, 0.5});
  matrix.mutable_grad() = torch::zeros({2, 2});
  gain.mutable_grad() = torch::zeros({2});
  adamw.step(0.1);
  CHECK(matrix[0][0].item<double>() == Approx(0.95));  // decayed by lr * wd, no gradient step
  CHECK(gain[0].item<double>() == Approx(1.0));

  matrix.mutable_grad() = torch::full({2, 2}, 0.3);
  gain.mutable_grad() = torch::full({2}, -0.2);
  adamw.step(0.1);
  auto saved = adamw.state();
  CHECK(saved.at("step").item<int64_t>() == 2);

  auto matrix2 = matrix.detach().clone().requires_grad_(true);
  auto gain2 = gain.detach().clone().requires_grad_(true);
  AdamW restored({{"w", matrix2, true}, {"g", gain2, false}}, {0.9, 0.95, 1e-8, 0.5});
  restored.load_state(saved);
  matrix.mutable_grad() = torch::full({2, 2}, 0.1);
  gain.mutable_grad() = torch::full({2}, 0.4);
  matrix2.mutable_grad() = torch::full({2, 2}, 0.1);
  gain2.mutable_grad() = torch::full({2}, 0.4);
  adamw.step(0.05);
  restored.step(0.05);
  CHECK(torch::equal(matrix, matrix2));
  CHECK(torch::equal(gain, gain2));
}

namespace {

// The parameters of the LibTorch comparison: shapes and gradient scales chosen so that each
// setting shows: a decayed matrix with unit gradients (the decay), an undecayed vector with
// gradients of 1e-3, a decayed 3-d tensor whose gradients of 1e-6 make eps a tenth of the
// denominator (eps), and an undecayed scalar.
struct ComparedParameter {
  std::string name;
  std::vector<int64_t> shape;
  double grad_scale;
  bool decay;
};
const std::vector<ComparedParameter> kCompared{{"matrix", {64, 33}, 1.0, true},
                                               {"gain", {33}, 1e-3, false},
                                               {"cube", {7, 5, 3}, 1e-6, true},
                                               {"scalar", {1}, 1.0, false}};

// A fresh gradient per step and parameter, the same for every optimizer compared.
std::vector<std::vector<torch::Tensor>> adamw_gradients(int64_t steps) {
  torch::manual_seed(57);
  std::vector<std::vector<torch::Tensor>> grads(static_cast<size_t>(steps));
  for (auto& step : grads)
    for (const auto& p : kCompared) step.push_back(torch::randn(p.shape) * p.grad_scale + 0.3 * p.grad_scale);
  return grads;
}

std::vector<torch::Tensor> adamw_initial() {
  torch::manual_seed(7);
  std::vector<torch::Tensor> initial;
  for (const auto& p : kCompared) initial.push_back(torch::randn(p.shape) * 0.1);
  return initial;
}

}  // namespace

// xtrain's AdamW, unfused and fused, against LibTorch's torch::optim::AdamW (its own C++ code,
// not a copy of the arithmetic): 100 steps under a warmup-cosine schedule, weight decay on the
// marked parameters, bias correction from step 1. Parameters (of order 0.1, as trained weights
// are) within 1e-6 absolute, moments within 1e-6 of their largest element. The unfused ops are
// LibTorch's arithmetic, bit for bit; the fused kernel rounds its multiply-adds once, and a
// parameter takes up to a float rounding of itself more or less each step. XTRAIN_NUMERIC_FAULT=adamw_decay,
// adamw_beta2 or adamw_eps makes xtrain's side wrong and this test fail (integration.numeric_faults).
TEST_CASE("AdamW follows LibTorch's torch::optim::AdamW over 100 steps", "[optim][adamw]") {
  const int64_t steps = 100;
  const double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
  const LrSchedule schedule{1e-3, 1e-4, 10, steps, Decay::cosine};
  const auto grads = adamw_gradients(steps);
  const auto initial = adamw_initial();

  std::vector<torch::Tensor> reference;
  for (const auto& tensor : initial) reference.push_back(tensor.clone().requires_grad_(true));
  std::vector<torch::Tensor> decayed, undecayed;
  for (size_t i = 0; i < kCompared.size(); ++i) (kCompared[i].decay ? decayed : undecayed).push_back(reference[i]);
  auto group_options = [&](double decay) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(schedule.at(1)).betas({beta1, beta2}).eps(eps).weight_decay(decay));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decayed, group_options(weight_decay));
  groups.emplace_back(undecayed, group_options(0.0));
  torch::optim::AdamW libtorch(groups, *group_options(weight_decay));

  std::map<bool, std::vector<NamedParameter>> xtrain;  // by fused
  std::map<bool, std::unique_ptr<AdamW>> optimizers;
  for (bool fused : {false, true}) {
    for (size_t i = 0; i < kCompared.size(); ++i)
      xtrain[fused].push_back({kCompared[i].name, initial[i].clone(), kCompared[i].decay});
    optimizers[fused] = std::make_unique<AdamW>(xtrain[fused], AdamWOptions{beta1, beta2, eps, weight_decay, fused});
  }

  for (int64_t step = 1; step <= steps; ++step) {
    const double lr = schedule.at(step);
    const auto& step_grads = grads[static_cast<size_t>(step - 1)];
    for (size_t i = 0; i < kCompared.size(); ++i) {
      reference[i].mutable_grad() = step_grads[i].clone();
      for (bool fused : {false, true}) xtrain[fused][i].tensor.mutable_grad() = step_grads[i].clone();
    }
    for (auto& group : libtorch.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
    libtorch.step();
    for (bool fused : {false, true}) optimizers[fused]->step(lr);
  }

  for (bool fused : {false, true}) {
    const auto state = optimizers[fused]->state();
    CHECK(state.at("step").item<int64_t>() == steps);
    double parameter_error = 0, moment_error = 0, moved = 0;
    for (size_t i = 0; i < kCompared.size(); ++i) {
      INFO((fused ? "fused, " : "unfused, ") << kCompared[i].name);
      const auto& expected = reference[i].detach();
      auto& libtorch_state = static_cast<torch::optim::AdamWParamState&>(
          *libtorch.state().at(reference[i].unsafeGetTensorImpl()));
      CHECK(libtorch_state.step() == steps);
      const double error = (xtrain[fused][i].tensor.detach() - expected).abs().max().item<double>();
      const double exp_avg_error =
          xtrain::testing::max_relative_error(state.at("exp_avg." + kCompared[i].name), libtorch_state.exp_avg());
      const double exp_avg_sq_error =
          xtrain::testing::max_relative_error(state.at("exp_avg_sq." + kCompared[i].name), libtorch_state.exp_avg_sq());
      CHECK(error <= 1e-6);
      CHECK(exp_avg_error <= 1e-6);
      CHECK(exp_avg_sq_error <= 1e-6);
      parameter_error = std::max(parameter_error, error);
      moment_error = std::max({moment_error, exp_avg_error, exp_avg_sq_error});
      moved = std::max(moved, (expected - initial[i]).abs().max().item<double>());
    }
    fmt::print("AdamW against torch::optim::AdamW ({}), {} steps: parameters {:.2e} max abs, moments {:.2e} max "
               "relative (tolerance 1e-6 each; the parameters moved up to {:.2e})\n",
               fused ? "fused" : "unfused", steps, parameter_error, moment_error, moved);
  }
}

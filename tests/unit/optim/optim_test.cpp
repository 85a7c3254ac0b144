#include <catch2/catch.hpp>

#include <cmath>

#include <torch/torch.h>

#include "optim/adamw.h"
#include "optim/grad_clip.h"
#include "optim/lr_schedule.h"

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

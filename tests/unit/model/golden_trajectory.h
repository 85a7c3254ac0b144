// The AdamW half of a golden test whose tool writes train_losses, final.<name> (transformers'
// float32 weights after the steps) and final64.<name> (the same steps in float64): runs the steps
// on `model` (clipping at 1, then AdamW with betas 0.9, 0.95, eps 1e-8, the decay where the
// family's spec says), checks each step's loss within 1e-5 relative of the tool's and the final
// weights by golden_parity_test.cpp's rule, and prints the figures under `label`.
#pragma once
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include "ckpt/safetensors.h"
#include "model/batch.h"
#include "model/causal_lm.h"
#include "model/spec/model_spec.h"
#include "optim/adamw.h"
#include "optim/grad_clip.h"
#include "tensor_compare.h"
#include "train/training_loss.h"

namespace xtrain::testing {

struct GoldenSteps {
  int steps = 3;
  double lr = 1e-3, weight_decay = 1.0;
};

inline void check_golden_adamw_steps(model::CausalLM& model, const std::string& label, const model::Batch& batch,
                                     const ckpt::TensorMap& golden, const GoldenSteps& run) {
  const auto& spec = model::model_spec(model.config().family);
  std::vector<optim::NamedParameter> parameters;
  for (const auto& item : model.named_parameters())
    parameters.push_back({item.key(), item.value(), spec.decays(item.key(), item.value().dim())});
  optim::AdamW adamw(parameters, {0.9, 0.95, 1e-8, run.weight_decay, /*fused=*/false});
  double step_loss_error = 0;
  for (int step = 0; step < run.steps; ++step) {
    for (auto& p : model.parameters()) p.mutable_grad() = torch::Tensor();
    auto loss = train::next_token_loss_of_hidden(model, model.forward(batch).hidden, batch.labels, 0);
    loss.backward();
    const double expected = golden.at("train_losses")[step].item<double>();
    const double error = std::abs(loss.item<double>() - expected) / std::abs(expected);
    CHECK(error < 1e-5);
    step_loss_error = std::max(step_loss_error, error);
    optim::clip_grad_norm(model.parameters(), 1.0);
    adamw.step(run.lr);
  }
  // golden_parity_test.cpp's rule: AdamW turns last-bit gradient differences into update
  // differences of up to 2 lr, so xtrain is held to transformers' own float32 distance from the
  // float64 run: the worst element within 8x the worst of transformers' tensors, each tensor's
  // rms within 4x transformers', plus a floor of 1e-4 lr.
  Distance reference_worst, xtrain_worst;
  for (const auto& item : model.named_parameters()) {
    const auto d = distance(golden.at("final." + item.key()), golden.at("final64." + item.key()));
    reference_worst = {std::max(reference_worst.max_abs, d.max_abs), std::max(reference_worst.rms, d.rms)};
  }
  for (const auto& item : model.named_parameters()) {
    INFO(item.key());
    const auto& float64 = golden.at("final64." + item.key());
    const auto xtrain = distance(item.value().detach(), float64);
    const auto reference = distance(golden.at("final." + item.key()), float64);
    CHECK(xtrain.max_abs <= 8 * reference_worst.max_abs + 1e-4 * run.lr);
    CHECK(xtrain.rms <= 4 * reference.rms + 1e-4 * run.lr);
    xtrain_worst = {std::max(xtrain_worst.max_abs, xtrain.max_abs), std::max(xtrain_worst.rms, xtrain.rms)};
  }
  fmt::print("golden parity ({}, {} AdamW steps): distance from the float64 trajectory in units of lr: xtrain {:.2e} "
             "max, {:.2e} rms; transformers float32 {:.2e} max, {:.2e} rms; step losses {:.2e}\n",
             label, run.steps, xtrain_worst.max_abs / run.lr, xtrain_worst.rms / run.lr,
             reference_worst.max_abs / run.lr, reference_worst.rms / run.lr, step_loss_error);
}

}  // namespace xtrain::testing

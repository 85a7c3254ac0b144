#include <torch/torch.h>

#include "model/causal_lm.h"
#include "model/small_llama.h"
#include "train/micro_batch_weight.h"
#include "train/schedule.h"
#include "train/training_loss.h"

// Catch after torch: c10 defines a CHECK macro of its own.
#include <catch2/catch.hpp>
#include "tensor_compare.h"

using namespace xtrain;

namespace {

// Micro batches of 2 rows of 12 tokens; the last has its first 7 targets masked, so micro
// batches carry different numbers of targets.
std::vector<data::MicroBatch> micro_batches(int64_t count) {
  torch::manual_seed(3);
  std::vector<data::MicroBatch> batches;
  for (int64_t i = 0; i < count; ++i) {
    auto tokens = torch::randint(0, 50, {2, 13}, torch::kInt64);
    data::MicroBatch batch;
    batch.inputs = tokens.narrow(1, 0, 12).contiguous();
    batch.targets = tokens.narrow(1, 1, 12).contiguous();
    batch.target_count = 24;
    if (i + 1 == count) {
      batch.targets.narrow(1, 0, 7).fill_(-100);
      batch.target_count = 24 - 14;
    }
    batches.push_back(batch);
  }
  return batches;
}

std::map<std::string, torch::Tensor> gradients(model::CausalLM& model) {
  std::map<std::string, torch::Tensor> grads;
  for (const auto& p : model.named_parameters()) grads[p.key()] = p.value().grad().clone();
  return grads;
}

// Each micro batch's forward and backward, weighed as the trainer weighs it
// (train/micro_batch_weight.h), recording the order the schedule asks for.
struct AccumulatedWork final : train::MicroBatchWork {
  AccumulatedWork(model::CausalLM& model, double targets) : model(model), targets(targets) {}
  train::MicroBatchLosses forward_backward(const data::MicroBatch& batch, int64_t index, int64_t count) override {
    REQUIRE(count == 4);
    order.push_back(index);
    const auto loss =
        train::training_loss(model, train::model_batch(batch.inputs, batch.targets, {}, torch::kCPU), 0).loss;
    (loss * train::micro_batch_loss_weight(batch.target_count, targets)).backward();
    const auto weighted = loss.detach().to(torch::kFloat64) * static_cast<double>(batch.target_count);
    return train::MicroBatchLosses{weighted, {{"router", weighted / 10}}, {}, {}, {}};
  }
  train::ChunkOutput forward_chunk(const parallel::PipelineChunk&, const data::MicroBatch&, int64_t, int64_t,
                                   const torch::Tensor&) override {
    FAIL("gradient accumulation runs no chunks");
    return {};
  }
  train::MicroBatchLosses forward(const data::MicroBatch&) override { return {}; }
  train::ChunkOutput forward_chunk_only(const parallel::PipelineChunk&, const data::MicroBatch&,
                                        const torch::Tensor&) override {
    return {};
  }
  model::CausalLM& model;
  double targets;
  std::vector<int64_t> order;
};

}  // namespace

TEST_CASE("GradientAccumulation: micro batches weighed as the trainer weighs them give the whole batch's gradients",
          "[train][schedule]") {
  const auto batches = micro_batches(4);
  torch::manual_seed(1);
  auto model = testing::SmallLlama{}.build(1);
  const double targets = train::local_target_count(batches, 1.0);

  // One pass over all rows at once: the mean over every target.
  std::vector<torch::Tensor> inputs, labels;
  for (const auto& b : batches) inputs.push_back(b.inputs), labels.push_back(b.targets);
  const auto whole =
      train::training_loss(*model, train::model_batch(torch::cat(inputs), torch::cat(labels), {}, torch::kCPU), 0).loss;
  whole.backward();
  const auto expected = gradients(*model);
  model->zero_grad();

  AccumulatedWork work(*model, targets);
  train::GradientAccumulation schedule;
  const auto losses = schedule.run(batches, work);
  const auto& order = work.order;
  CHECK(order == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(losses.loss_sum.item<double>() / targets == Approx(whole.item<double>()).epsilon(1e-6));
  CHECK(losses.aux_losses.at("router").item<double>() == Approx(losses.loss_sum.item<double>() / 10).epsilon(1e-12));
  const auto actual = gradients(*model);
  for (const auto& [name, grad] : expected) {
    INFO(name);
    CHECK(testing::max_relative_error(actual.at(name), grad) < 1e-5);
  }
}

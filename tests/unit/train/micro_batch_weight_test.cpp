// The trainer's weighting of micro batches (train/micro_batch_weight.h): micro batches and
// data-parallel ranks of unequal target counts, weighed by it and summed, give the gradients of
// the global batch's mean loss over its counted targets.
#include <torch/torch.h>

#include "data/micro_batch.h"
#include "model/causal_lm.h"
#include "model/small_llama.h"
#include "train/micro_batch_weight.h"
#include "train/training_loss.h"

// Catch after torch: c10 defines a CHECK macro of its own.
#include <catch2/catch.hpp>
#include "tensor_compare.h"

using namespace xtrain;

namespace {

// A micro batch of 2 rows of 12 tokens whose first `ignored` targets (row-major) carry no loss,
// as prompts and padding do; target_count counted as the loader counts it.
data::MicroBatch micro_batch(int64_t ignored) {
  auto tokens = torch::randint(0, 50, {2, 13}, torch::kInt64);
  data::MicroBatch batch;
  batch.inputs = tokens.narrow(1, 0, 12).contiguous();
  batch.targets = tokens.narrow(1, 1, 12).contiguous();
  batch.targets.view({-1}).narrow(0, 0, ignored).fill_(data::kIgnoreIndex);
  batch.target_count = batch.targets.ne(data::kIgnoreIndex).sum().item<int64_t>();
  return batch;
}

torch::Tensor mean_loss(model::CausalLM& model, const torch::Tensor& inputs, const torch::Tensor& targets) {
  return train::training_loss(model, train::model_batch(inputs, targets, {}, torch::kCPU), 0).loss;
}

std::map<std::string, torch::Tensor> take_gradients(model::CausalLM& model) {
  std::map<std::string, torch::Tensor> grads;
  for (const auto& p : model.named_parameters()) {
    grads[p.key()] = p.value().grad().clone();
    p.value().mutable_grad() = torch::Tensor();
  }
  return grads;
}

}  // namespace

TEST_CASE("micro_batch_loss_weight: a micro batch's share of the global batch's targets", "[train][weight]") {
  CHECK(train::micro_batch_loss_weight(10, 40) == 0.25);
  CHECK(train::micro_batch_loss_weight(40, 40) == 1.0);
  CHECK(train::micro_batch_loss_weight(0, 40) == 0.0);                 // only prompt or padding
  CHECK(train::micro_batch_loss_weight(10, 40, 1024.0) == 256.0);      // fp16's loss scale multiplies
  CHECK(train::micro_batch_loss_weight(0, 0) == 0.0);                  // no target anywhere: no NaN
  CHECK(train::micro_batch_loss_weight(0, 0, 1024.0) == 0.0);

  torch::manual_seed(2);
  const std::vector<data::MicroBatch> batches{micro_batch(0), micro_batch(14), micro_batch(24)};
  CHECK(train::local_target_count(batches, 1.0) == 24 + 10 + 0);
  // A tensor-parallel peer holds the same samples and does not count them again.
  CHECK(train::local_target_count(batches, 0.0) == 0.0);
  CHECK(train::local_target_count({}, 1.0) == 0.0);
}

TEST_CASE("two data-parallel ranks' micro batches, weighed by micro_batch_loss_weight, give the global mean's grads",
          "[train][weight]") {
  torch::manual_seed(4);
  // Rank 0 holds 24 + 10 targets, rank 1 3 + 0 + 24: its ranks and micro batches differ in
  // targets, so an unweighted mean of the micro batches' means would be wrong.
  const std::vector<std::vector<data::MicroBatch>> ranks{{micro_batch(0), micro_batch(14)},
                                                         {micro_batch(21), micro_batch(24), micro_batch(0)}};
  // A tensor-parallel peer of rank 1 holds its samples with data share 0.
  const double global = train::local_target_count(ranks[0], 1.0) + train::local_target_count(ranks[1], 1.0) +
                        train::local_target_count(ranks[1], 0.0);
  REQUIRE(global == 24 + 10 + 3 + 0 + 24);

  torch::manual_seed(1);
  auto model = testing::SmallLlama{}.build(1);
  // The reference: one pass over every row of the global batch, the mean over its targets.
  std::vector<torch::Tensor> inputs, targets;
  for (const auto& rank : ranks)
    for (const auto& b : rank) inputs.push_back(b.inputs), targets.push_back(b.targets);
  const auto whole = mean_loss(*model, torch::cat(inputs), torch::cat(targets));
  whole.backward();
  const auto expected = take_gradients(*model);

  // Each rank accumulates its micro batches' weighted gradients; the data-parallel reduction
  // sums the ranks', which one model accumulating all of them stands for.
  double weights = 0, weighted_loss = 0, plain_mean = 0;
  for (const auto& rank : ranks)
    for (const auto& b : rank) {
      const double weight = train::micro_batch_loss_weight(b.target_count, global);
      const auto loss = mean_loss(*model, b.inputs, b.targets);
      (loss * weight).backward();
      weights += weight;
      weighted_loss += weight * loss.item<double>();
      plain_mean += loss.item<double>() / 5;
    }
  const auto actual = take_gradients(*model);
  CHECK(weights == Approx(1.0).epsilon(1e-12));
  CHECK(weighted_loss == Approx(whole.item<double>()).epsilon(1e-6));
  // The batches discriminate: weighing every micro batch alike misses the mean by far more.
  CHECK(std::abs(plain_mean - whole.item<double>()) > 1e-2 * whole.item<double>());
  for (const auto& [name, grad] : expected) {
    INFO(name);
    CHECK(testing::max_relative_error(actual.at(name), grad) < 1e-5);
  }
}

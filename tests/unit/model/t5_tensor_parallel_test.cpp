// T5 split over 2 tensor-parallel thread ranks (model/t5/t5.h): against one process holding every
// parameter, each rank's training loss is the same and each parameter's gradient is the whole
// model's, sliced as the rank's plan slices it (whole for the replicated norms), in both styles
// (v1.0: ReLU, tied; v1.1: gated GELU, untied, a 3-block decoder), with and without keyed
// dropout; the vocabulary of 97 rows splits 49 + 48.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "model/layers/parameter_init.h"
#include "model/layers/parameter_source.h"
#include "model/t5/t5.h"
#include "parallel/rank_threads.h"
#include "parallel/tensor_parallel_plan.h"
#include "parallel/thread_comm.h"
#include "tensor_compare.h"
#include "train/training_loss.h"

using namespace xtrain;

namespace {

model::ModelConfig t5_tp_config(bool v11, double dropout) {
  model::ModelConfig c;
  c.family = "t5";
  c.vocab_size = 97;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_heads = c.num_kv_heads = 4;
  c.head_dim_override = 8;
  c.intermediate_size = 64;
  c.norm_eps = 1e-6;
  c.dropout = dropout;
  c.tie_embeddings = !v11;
  c.encoder_decoder.gated_gelu = v11;
  c.encoder_decoder.decoder_layers = v11 ? 3 : 0;
  c.encoder_decoder.relative_buckets = 8;
  c.encoder_decoder.relative_max_distance = 20;
  return c;
}

std::shared_ptr<model::T5ForConditionalGeneration> seeded_t5(const model::ModelConfig& c) {
  auto t5 = std::make_shared<model::T5ForConditionalGeneration>(c);
  model::materialize(*t5, model::init_source(t5->init_plan(), 11));
  return t5;
}

// Encoder rows of 12 tokens (one padded), decoder rows of 6 (one unlabelled position), and the
// dropout key of the rows [encoder | decoder].
model::Batch t5_tp_batch() {
  torch::manual_seed(5);
  const int64_t b = 2, s = 12, t = 6;
  model::Batch batch;
  batch.input_ids = torch::randint(1, 97, {b, s}, torch::kInt64);
  auto attention_mask = torch::ones({b, s}, torch::kInt64);
  attention_mask[1].narrow(0, 8, 4).zero_();
  batch.extra["attention_mask"] = attention_mask;
  batch.labels = torch::randint(1, 97, {b, t}, torch::kInt64);
  batch.labels[1][5] = -100;
  batch.decoder_input_ids = torch::zeros({b, t}, torch::kInt64);
  batch.decoder_input_ids.narrow(1, 1, t - 1).copy_(batch.labels.narrow(1, 0, t - 1).clamp_min(0));
  batch.dropout = {17, 3, torch::arange(b * (s + t), torch::kInt64).view({b, s + t})};
  return batch;
}

}  // namespace

TEST_CASE("t5 split over 2 tensor-parallel ranks computes one process's loss and gradients", "[model][t5][tp]") {
  const bool v11 = GENERATE(false, true);
  const double dropout = GENERATE(0.0, 0.1);
  INFO((v11 ? "v1.1" : "v1.0") << ", dropout " << dropout);
  const auto config = t5_tp_config(v11, dropout);
  const auto batch = t5_tp_batch();
  auto reference = seeded_t5(config);
  const auto want = train::training_loss(*reference, batch, 0).loss;
  want.backward();

  constexpr int64_t tp = 2;
  std::vector<std::shared_ptr<model::T5ForConditionalGeneration>> ranks{seeded_t5(config), seeded_t5(config)};
  std::vector<model::TensorParallelPlan> plans(tp);
  std::vector<torch::Tensor> losses(tp);
  parallel::ThreadWorld threads;
  const auto errors = testing::run_ranks(tp, [&](int64_t r) {
    auto& t5 = *ranks[static_cast<size_t>(r)];
    auto& plan = plans[static_cast<size_t>(r)] = t5.tensor_parallel_plan(r, tp);
    {
      torch::NoGradGuard no_grad;
      for (auto& item : t5.named_parameters())
        if (const auto slice = plan.find(item.key()); slice != plan.end())
          item.value().set_data(item.value().narrow(slice->second.dim, slice->second.share.first,
                                                    slice->second.share.count).contiguous());
    }
    t5.use_tensor_parallel(parallel::make_tensor_parallel_ops(threads.make_group(r, "tp", {0, 1}), false));
    losses[static_cast<size_t>(r)] = train::training_loss(t5, batch, 0).loss;
    losses[static_cast<size_t>(r)].backward();
  });
  REQUIRE(errors == std::vector<std::string>(tp, ""));

  const auto whole = reference->named_parameters();
  for (int64_t r = 0; r < tp; ++r) {
    const auto& plan = plans[static_cast<size_t>(r)];
    CHECK(plan.at("shared.weight").share.count == (r == 0 ? 49 : 48));
    CHECK(testing::max_relative_error(losses[static_cast<size_t>(r)], want) < 1e-6);
    for (const auto& item : ranks[static_cast<size_t>(r)]->named_parameters()) {
      INFO("rank " << r << ": " << item.key());
      auto expected = whole[item.key()].grad();
      if (const auto slice = plan.find(item.key()); slice != plan.end())
        expected = expected.narrow(slice->second.dim, slice->second.share.first, slice->second.share.count);
      REQUIRE(item.value().grad().defined());
      CHECK(testing::max_relative_error(item.value().grad(), expected) < 1e-5);
    }
  }
  // Every split the plan names: the position tables by head, and no norm.
  CHECK(plans[1].at("decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight").dim == 1);
  CHECK(plans[1].count("encoder.block.0.layer.0.layer_norm.weight") == 0);
}

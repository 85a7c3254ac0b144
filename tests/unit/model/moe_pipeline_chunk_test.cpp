// A mixture of experts cut into pipeline chunks (CausalLM::forward_chunk): every chunk reports
// its MoE layers' router losses and expert loads in the whole model's names and shapes, zeros for
// the other chunks' layers, and the chunks' reports add up to the whole forward's; a chunk of
// dense layers only reports zeros under the same names. The deferred balancing loss is refused.
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include "small_llama.h"

using namespace xtrain;

namespace {

std::map<std::string, torch::Tensor> chunk_aux_by_name(const model::ModelOutput& output) {
  std::map<std::string, torch::Tensor> named;
  for (const auto& [name, value] : output.aux_losses) named[name] = value;
  return named;
}

}  // namespace

TEST_CASE("pipeline chunks of a mixture of experts report what the whole forward reports", "[model][moe][pp]") {
  auto shape = testing::SmallLlama{};
  shape.family = "qwen3_moe";
  shape.layers = 3;
  auto config = shape.with_experts(16).config();
  config.router_aux_loss_coef = 0.01;
  config.router_z_loss_coef = 0.001;
  auto model = model::build_model(config, 3);
  model::Batch batch;
  torch::manual_seed(2);
  batch.input_ids = torch::randint(0, shape.vocab, {2, 8});

  const auto whole = model->forward(batch);
  const auto dense = model->forward_chunk(batch, {}, 0, 1, true, false);  // the embedding and layer 0
  const auto first = model->forward_chunk(batch, dense.hidden, 1, 2, false, false);
  const auto last = model->forward_chunk(batch, first.hidden, 2, 3, false, true);

  CHECK(torch::allclose(last.hidden, whole.hidden, 1e-6, 1e-6));
  REQUIRE(whole.expert_load.sizes() == torch::IntArrayRef{2, 4});
  for (const auto* chunk : {&dense, &first, &last}) {
    CHECK(chunk->expert_load.sizes() == whole.expert_load.sizes());
    CHECK(chunk->dropped.sizes() == whole.dropped.sizes());
    CHECK(chunk->aux_losses.size() == whole.aux_losses.size());
  }
  CHECK(dense.expert_load.abs().sum().item<double>() == 0.0);
  CHECK(first.expert_load[1].abs().sum().item<double>() == 0.0);  // layer 2's row is the last chunk's
  CHECK(torch::equal(dense.expert_load + first.expert_load + last.expert_load, whole.expert_load));
  CHECK(torch::equal(dense.dropped + first.dropped + last.dropped, whole.dropped));
  const auto d = chunk_aux_by_name(dense), f = chunk_aux_by_name(first), l = chunk_aux_by_name(last);
  for (const auto& [name, value] : whole.aux_losses) {
    INFO(name);
    REQUIRE((d.count(name) && f.count(name) && l.count(name)));
    CHECK(d.at(name).item<double>() == 0.0);
    CHECK((d.at(name) + f.at(name) + l.at(name)).item<double>() == Approx(value.item<double>()).epsilon(1e-6));
  }
}

TEST_CASE("a pipeline chunk refuses the balancing loss deferred over every layer", "[model][moe][pp]") {
  auto shape = testing::SmallLlama{};
  shape.family = "qwen3_moe";
  auto config = shape.with_experts(16).config();
  config.router_aux_loss_coef = 0.01;
  config.router_aux_loss_scope = model::AuxLossScope::model;
  auto model = model::build_model(config, 3);
  model::Batch batch;
  batch.input_ids = torch::randint(0, shape.vocab, {1, 8});
  CHECK_THROWS_WITH(model->forward_chunk(batch, {}, 0, 2, true, true),
                    Catch::Contains("model.router_aux_loss_scope model and router_aux_loss_global_average"));
}

// Seeded per-parameter init and unmaterialised models: a slice drawn alone equals the same slice
// of the whole parameter, so that every layout starts from the same weights; a model built
// without storage holds none until a source fills it.
#include <cmath>
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "model/causal_lm.h"
#include "model/model_builder.h"
#include "model/spec/model_spec.h"
#include "model/layers/parameter_init.h"
#include "model/layers/parameter_source.h"
#include "model/small_llama.h"

using namespace xtrain;

TEST_CASE("a slice of a seeded parameter is the same slice of the whole parameter", "[model][init]") {
  const model::ParameterInit normal{model::ParameterInit::Kind::normal, 0.02};
  const int64_t numel = 3 * model::kInitBlock + 123;
  const auto whole = model::initial_values(normal, 7, "model.layers.0.mlp.up_proj.weight", 0, numel);
  CHECK(whole.std().item<double>() == Approx(0.02).epsilon(0.01));
  CHECK(std::abs(whole.mean().item<double>()) < 1e-3);
  for (const auto& [begin, count] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 1}, {5, 17}, {model::kInitBlock - 3, 9}, {model::kInitBlock, model::kInitBlock}, {100, 2 * model::kInitBlock + 7},
           {numel - 50, 50}}) {
    INFO("begin " << begin << ", count " << count);
    CHECK(torch::equal(model::initial_values(normal, 7, "model.layers.0.mlp.up_proj.weight", begin, count),
                       whole.narrow(0, begin, count)));
  }
  // Another name or another seed draws other values.
  CHECK_FALSE(torch::equal(model::initial_values(normal, 7, "model.layers.1.mlp.up_proj.weight", 0, 64),
                           whole.narrow(0, 0, 64)));
  CHECK_FALSE(torch::equal(model::initial_values(normal, 8, "model.layers.0.mlp.up_proj.weight", 0, 64),
                           whole.narrow(0, 0, 64)));
  CHECK(torch::equal(model::initial_values({model::ParameterInit::Kind::ones, 0}, 7, "n", 3, 4), torch::ones({4})));
}

TEST_CASE("each family's init plan covers exactly its parameters, by its module tree", "[model][init]") {
  for (const auto& family : model::model_families()) {
    if (family == "llava") continue;  // needs a vision tower's shape: llava_golden_test.cpp covers it
    for (bool tied : {false, true}) {
      INFO(family << (tied ? ", tied" : ", untied"));
      testing::SmallLlama shape;
      shape.family = family;
      shape.tied = tied;
      const bool experts = model::model_spec(family).capabilities.experts;
      if (experts) shape.with_experts(24);
      auto config = shape.config();
      if (family == "vit") config.vision.image_size = 12, config.vision.patch_size = 4;
      if (family == "clip") {
        if (tied) continue;  // clip has no head to tie
        config.num_kv_heads = config.num_heads;
        config.vision = {24, 2, 4, 48, 12, 4};
      }
      const auto model = model::declare_model(config);
      const auto plan = model->init_plan();
      std::vector<std::string> names, planned;
      for (const auto& item : model->named_parameters()) {
        names.push_back(item.key());
        // A one-element parameter (clip's logit_scale) looks the same either way.
        if (item.value().numel() > 1) CHECK_FALSE(model::is_materialized(item.value()));
      }
      for (const auto& [name, init] : plan) planned.push_back(name);
      std::sort(names.begin(), names.end());
      CHECK(names == planned);
      if (family == "vit") {  // ViT draws every weight at init_std, the class token and positions too
        CHECK(plan.at("vit.encoder.layer.1.output.dense.weight").std == Approx(0.02));
        CHECK(plan.at("vit.embeddings.position_embeddings").std == Approx(0.02));
        CHECK(plan.at("vit.embeddings.patch_embeddings.projection.bias").kind == model::ParameterInit::Kind::zeros);
        continue;
      }
      if (family == "clip") {  // CLIP's init (factor 1): by width and depth, logit_scale at log(1 / 0.07)
        const double hidden = static_cast<double>(config.hidden_size);
        CHECK(plan.at("text_model.encoder.layers.1.mlp.fc1.weight").std == Approx(1 / std::sqrt(2 * hidden)));
        CHECK(plan.at("vision_model.embeddings.class_embedding").std == Approx(1 / std::sqrt(24.0)));
        CHECK(plan.at("logit_scale").kind == model::ParameterInit::Kind::constant);
        CHECK(plan.at("logit_scale").value == Approx(2.6592));
        continue;
      }
      if (family == "t5") {  // T5 draws by fan-in (transformers' T5 _init_weights), gains are 1
        const double hidden = static_cast<double>(config.hidden_size);
        CHECK(plan.at("encoder.block.1.layer.0.SelfAttention.k.weight").std == Approx(1 / std::sqrt(hidden)));
        CHECK(plan.at("decoder.block.1.layer.2.DenseReluDense.wo.weight").std ==
              Approx(1 / std::sqrt(static_cast<double>(config.intermediate_size))));
        CHECK(plan.at("decoder.final_layer_norm.weight").kind == model::ParameterInit::Kind::ones);
        continue;
      }
      if (family == "bert") {  // BERT draws every weight at init_std
        CHECK(plan.at("bert.encoder.layer.1.output.dense.weight").std == Approx(0.02));
        CHECK(plan.at("bert.encoder.layer.1.output.LayerNorm.bias").kind == model::ParameterInit::Kind::zeros);
        continue;
      }
      // Residual-stream writers are drawn narrower (init_std / sqrt(2 * layers)), gains are 1.
      CHECK(plan.at(experts ? "model.layers.1.mlp.experts.down_proj" : "model.layers.1.mlp.down_proj.weight").std ==
            Approx(0.02 / 2.0));
      if (experts)  // gpt_oss's router is named as transformers names it
        CHECK(plan.at(family == "gpt_oss" ? "model.layers.1.mlp.router.weight" : "model.layers.1.mlp.gate.weight").std ==
              Approx(0.02));
      CHECK(plan.at("model.layers.1.self_attn.q_proj.weight").std == Approx(0.02));
      CHECK(plan.at("model.norm.weight").kind == model::ParameterInit::Kind::ones);
    }
  }
}

TEST_CASE("an unmaterialised model holds no parameter memory until a source fills it", "[model][init]") {
  testing::SmallLlama shape;
  shape.vocab = 4096;
  shape.hidden = 256;
  const auto model = model::declare_model(shape.config());
  int64_t bytes = 0;
  for (const auto& p : model->parameters()) bytes += p.is_non_overlapping_and_dense() ? p.nbytes() : 0;
  CHECK(bytes <= 64);  // scalars at most: 1-element stand-ins count as dense
  CHECK(model->num_parameters() == shape.build()->num_parameters());
  model::materialize(*model, model::init_source(model->init_plan(), 1));
  const auto built = shape.build(1);
  auto built_parameters = built->named_parameters();
  for (const auto& item : model->named_parameters()) {
    INFO(item.key());
    CHECK(model::is_materialized(item.value()));
    CHECK(torch::equal(item.value(), built_parameters[item.key()]));
  }
}

// LLaVA against transformers' LlavaForConditionalGeneration (tools/reference/golden_vlm.py): the
// folder xtrain exports gives the same logits, causal-LM loss and gradients on a sample with two
// images; the folder loads back to the same model; config.json refuses what xtrain does not compute.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <map>

#include <fmt/format.h>
#include <torch/torch.h>

#include "model/spec/hf_config.h"
#include "ckpt/hf_folder.h"
#include "ckpt/safetensors.h"
#include "model/model_builder.h"
#include "model/spec/model_spec.h"
#include "scratch_dir.h"
#include "tensor_compare.h"
#include "train/training_loss.h"
#include "util/input_error.h"

using namespace xtrain;

namespace {

constexpr int64_t kImageToken = 99;

model::ModelConfig small_llava(int64_t feature_layer = -2, const std::string& select = "default") {
  model::ModelConfig c;
  c.family = "llava";
  c.vocab_size = 100;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.intermediate_size = 64;
  c.max_seq_len = 64;
  auto& v = c.vision;
  v.hidden_size = 24;
  v.num_layers = 2;
  v.num_heads = 4;
  v.intermediate_size = 48;
  v.image_size = 30;
  v.patch_size = 10;
  v.feature_layer = feature_layer;
  v.feature_select = select;
  v.image_token_index = kImageToken;
  v.image_seq_length = v.features_per_image();
  return c;
}

// Biases start at 0 and norm gains at 1: give them values, so that they are tested.
std::shared_ptr<model::CausalLM> small_llava_model(const model::ModelConfig& config, uint64_t seed) {
  auto model = model::build_model(config, seed);
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters())
    if (p.dim() == 1) p.add_(torch::randn_like(p) * 0.1);
  return model;
}

// One sample: text, the first image's placeholders, text, the second's, text.
torch::Tensor sample_ids(int64_t per_image) {
  auto text = [](int64_t n) { return torch::randint(1, kImageToken, {n}, torch::kInt64); };
  auto image = [per_image] { return torch::full({per_image}, kImageToken, torch::kInt64); };
  return torch::cat({text(3), image(), text(4), image(), text(5)}).unsqueeze(0);
}

}  // namespace

TEST_CASE("LLaVA's logits, loss and gradients match transformers' LlavaForConditionalGeneration on two images",
          "[model][golden][llava]") {
  const auto [feature_layer, select] = GENERATE(std::pair<int64_t, std::string>{-2, "default"},
                                                std::pair<int64_t, std::string>{-1, "full"});
  INFO("vision_feature_layer " << feature_layer << ", " << select);
  testing::ScratchDir scratch;
  const std::string dir = (scratch.path() / "model").string();
  torch::manual_seed(11);
  const auto config = small_llava(feature_layer, select);
  auto model = small_llava_model(config, 11);
  ckpt::save_hf_folder(dir, *model, 2);
  const auto ids = sample_ids(config.vision.features_per_image());
  const auto hf_labels = ids.masked_fill(ids.eq(kImageToken), -100);
  const auto pixels = torch::randn({2, 3, 30, 30});
  const std::string batch_path = (scratch.path() / "batch.safetensors").string();
  const std::string out_path = (scratch.path() / "golden.safetensors").string();
  ckpt::save_safetensors(batch_path, {{"input_ids", ids}, {"labels", hf_labels}, {"pixel_values", pixels}});
  const std::string command = fmt::format("{} {}/tools/reference/golden_vlm.py --checkpoint {} --batch {} --out {}",
                                          XTRAIN_PYTHON, XTRAIN_SOURCE_DIR, dir, batch_path, out_path);
  REQUIRE(std::system(command.c_str()) == 0);
  auto golden = ckpt::load_safetensors(out_path).tensors;

  model::Batch batch;
  batch.input_ids = ids;
  // xtrain's labels are the next token's, at each position (transformers shifts inside its loss).
  batch.labels = torch::cat({hf_labels.narrow(1, 1, ids.size(1) - 1), torch::full({1, 1}, -100, torch::kInt64)}, 1);
  batch.extra["pixel_values"] = pixels;
  const double logits_error = testing::max_relative_error(model->logits(batch).detach(), golden.at("logits"));
  CHECK(logits_error < 1e-5);
  auto loss = train::next_token_loss_of_hidden(*model, model->forward(batch).hidden, batch.labels, 0);
  const double loss_error = testing::max_relative_error(loss.detach(), golden.at("loss"));
  CHECK(loss_error < 1e-5);
  loss.backward();
  double grad_error = 0;
  int64_t compared = 0, unread = 0;
  for (const auto& item : model->named_parameters()) {
    INFO(item.key());
    const auto& expected = golden.at("grad." + item.key());
    if (!item.value().grad().defined()) {
      // Layers past the feature layer and post_layernorm: no output reads them, on either side.
      CHECK(expected.abs().max().item<double>() == 0);
      ++unread;
      continue;
    }
    const auto& key = item.key();
    if (key.size() > 12 && key.compare(key.size() - 12, 12, ".k_proj.bias") == 0) {
      // Zero in exact arithmetic (a key bias shifts a query's scores alike, which softmax
      // ignores): both sides are rounding noise, compared against the scale of the query's.
      const auto query_bias = "grad." + key.substr(0, key.size() - 11) + "q_proj.bias";
      CHECK((item.value().grad() - expected).abs().max().item<double>() <
            1e-5 * golden.at(query_bias).abs().max().item<double>());
      ++compared;
      continue;
    }
    const double error = testing::max_relative_error(item.value().grad(), expected);
    CHECK(error < 1e-5);
    grad_error = std::max(grad_error, error);
    ++compared;
  }
  // The tower (39 tensors), the projector (4), the language model (21).
  CHECK(compared + unread == 39 + 4 + 21);
  CHECK(unread == (feature_layer == -2 ? 16 + 2 : 2));
  fmt::print("golden parity (llava, two images, vision_feature_layer {}, {}): worst relative error: logits {:.2e}, "
             "loss {:.2e}, gradients {:.2e} ({} tensors, {} unread)\n",
             feature_layer, select, logits_error, loss_error, grad_error, compared, unread);
}

TEST_CASE("a LLaVA Hugging Face folder loads back to the same logits", "[model][llava]") {
  testing::ScratchDir scratch;
  const std::string dir = (scratch.path() / "model").string();
  torch::manual_seed(3);
  const auto config = small_llava();
  auto model = small_llava_model(config, 3);
  ckpt::save_hf_folder(dir, *model, 2);
  auto loaded = ckpt::load_hf_folder(dir);
  REQUIRE(loaded->config().family == "llava");
  CHECK(loaded->config().vision.feature_layer == -2);
  CHECK(loaded->config().vision.image_token_index == kImageToken);
  model::Batch batch;
  batch.input_ids = sample_ids(config.vision.features_per_image());
  batch.extra["pixel_values"] = torch::randn({2, 3, 30, 30});
  torch::NoGradGuard no_grad;
  CHECK(torch::equal(model->logits(batch), loaded->logits(batch)));
}

TEST_CASE("llava: a placeholder count other than the images' features is an error", "[model][llava]") {
  auto model = small_llava_model(small_llava(), 4);
  torch::NoGradGuard no_grad;
  model::Batch batch;
  batch.input_ids = sample_ids(9);
  batch.extra["pixel_values"] = torch::randn({1, 3, 30, 30});
  CHECK_THROWS_WITH(model->forward(batch), Catch::Contains("18 image placeholder tokens (id 99) for 1 images of 9"));
  batch.extra.clear();
  CHECK_THROWS_WITH(model->forward(batch), Catch::Contains("18 image placeholder tokens and no pixel_values"));
}

TEST_CASE("llava's config.json round-trips and refuses what xtrain does not compute", "[model][llava]") {
  const auto& spec = model::model_spec("llava");
  auto json = spec.to_hf_config(small_llava(), 2);
  CHECK(&model::model_spec_for_hf(json, "config.json") == &spec);
  const auto back = ckpt::model_config_from_hf(json, "config.json");
  CHECK(back.family == "llava");
  CHECK(back.hidden_size == 32);
  CHECK(back.num_kv_heads == 2);
  CHECK(back.vision.hidden_size == 24);
  CHECK(back.vision.num_patches() == 9);
  CHECK(back.vision.image_seq_length == 9);
  auto bad = json;
  bad["vision_config"]["hidden_act"] = "gelu";
  CHECK_THROWS_WITH(spec.from_hf_config(bad, "m/config.json"),
                    "m/config.json vision_config: hidden_act \"gelu\"; xtrain's CLIP tower computes quick_gelu");
  bad = json;
  bad["vision_feature_layer"] = nlohmann::json::array({-2, -1});
  CHECK_THROWS_AS(spec.from_hf_config(bad, "m/config.json"), InputError);
  bad = json;
  bad["text_config"]["model_type"] = "mistral";
  CHECK_THROWS_WITH(spec.from_hf_config(bad, "m/config.json"),
                    Catch::Contains("m/config.json text_config: model_type \"mistral\""));
  bad = json;
  bad["vision_feature_select_strategy"] = "cls";
  CHECK_THROWS_AS(spec.from_hf_config(bad, "m/config.json"), InputError);
  // The names of transformers' modules and of older checkpoints map onto the stored ones.
  CHECK(spec.from_hf_name("vision_tower.vision_model.encoder.layers.0.mlp.fc1.weight") ==
        "vision_tower.encoder.layers.0.mlp.fc1.weight");
  CHECK(spec.from_hf_name("model.language_model.norm.weight") == "language_model.model.norm.weight");
  CHECK(spec.from_hf_name("lm_head.weight") == "language_model.lm_head.weight");
}

TEST_CASE("llava's init plan and shard plan cover each parameter once", "[model][llava]") {
  const auto config = small_llava();
  auto model = model::declare_model(config);
  const auto init = model->init_plan();
  const auto plan = model->shard_plan();
  std::map<std::string, int> units_of;
  for (const auto& block : plan.blocks)
    for (const auto& unit : block)
      for (const auto& [name, tensor] : unit.parameters) ++units_of[name];
  for (const auto& [name, tensor] : plan.head.parameters) ++units_of[name];
  CHECK_FALSE(plan.embedding.has_value());
  // The first encoder layer (the features are the second-to-last hidden states), then the decoder's.
  REQUIRE(plan.blocks.size() == 1 + 2);
  CHECK(plan.blocks[0][0].name == "vision_tower.encoder.layers.0");
  CHECK(plan.blocks[1][0].name == "language_model.model.layers.0");
  for (const auto& item : model->named_parameters()) {
    INFO(item.key());
    CHECK(init.count(item.key()) == 1);
    CHECK(units_of[item.key()] == 1);
  }
  CHECK(init.size() == model->named_parameters().size());
  CHECK(units_of.size() == model->named_parameters().size());
  CHECK(init.at("vision_tower.embeddings.class_embedding").std == Approx(1.0 / std::sqrt(24.0)));
  CHECK(init.at("multi_modal_projector.linear_1.bias").kind == model::ParameterInit::Kind::zeros);
  CHECK(init.at("language_model.model.norm.weight").kind == model::ParameterInit::Kind::ones);
  CHECK_THROWS_AS(model->tensor_parallel_plan(0, 2), std::invalid_argument);
}

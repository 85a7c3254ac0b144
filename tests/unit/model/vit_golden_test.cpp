// ViT against transformers' ViTForImageClassification (tools/reference/golden_vit.py): a tiny
// random model that transformers writes loads into xtrain and gives the same logits,
// cross-entropy loss and gradients; the folder xtrain exports loads back to the same logits;
// three steps of clipping and AdamW end as near the float64 trajectory as transformers' own float32
// run does (the rule of golden_parity_test.cpp); config.json refuses what xtrain's ViT does not
// compute.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "ckpt/hf_folder.h"
#include "ckpt/safetensors.h"
#include "model/golden_trajectory.h"
#include "model/spec/model_spec.h"
#include "scratch_dir.h"
#include "tensor_compare.h"
#include "train/training_loss.h"

using namespace xtrain;

TEST_CASE("ViT's logits, loss and gradients match transformers' ViTForImageClassification", "[model][golden][vit]") {
  testing::ScratchDir scratch;
  const std::string dir = (scratch.path() / "model").string();
  const std::string tool = fmt::format("{} {}/tools/reference/golden_vit.py", XTRAIN_PYTHON, XTRAIN_SOURCE_DIR);
  REQUIRE(std::system(fmt::format("{} make --out {} --seed 3", tool, dir).c_str()) == 0);
  auto model = ckpt::load_hf_folder(dir);
  REQUIRE(model->config().family == "vit");
  REQUIRE(model->config().vocab_size == 5);
  REQUIRE(model->config().norm_eps == 1e-6);

  torch::manual_seed(3);
  const int64_t n = 6;
  const auto pixels = torch::randn({n, 3, 12, 12});
  const auto labels = torch::randint(0, 5, {n}, torch::kInt64);
  const std::string batch_path = (scratch.path() / "batch.safetensors").string();
  const std::string out_path = (scratch.path() / "golden.safetensors").string();
  ckpt::save_safetensors(batch_path, {{"pixel_values", pixels}, {"labels", labels}});
  REQUIRE(std::system(fmt::format("{} golden --checkpoint {} --batch {} --out {}", tool, dir, batch_path, out_path)
                          .c_str()) == 0);
  auto golden = ckpt::load_safetensors(out_path).tensors;

  model::Batch batch;
  batch.input_ids = torch::zeros({n, 1}, torch::kInt64);
  batch.labels = labels.view({n, 1});
  batch.extra["pixel_values"] = pixels;
  const double logits_error =
      testing::max_relative_error(model->logits(batch).detach().view({n, 5}), golden.at("logits"));
  CHECK(logits_error < 1e-5);
  auto loss = train::next_token_loss_of_hidden(*model, model->forward(batch).hidden, batch.labels, 0);
  const double loss_error = testing::max_relative_error(loss.detach(), golden.at("loss"));
  CHECK(loss_error < 1e-5);
  loss.backward();
  double grad_error = 0;
  int64_t compared = 0;
  for (const auto& item : model->named_parameters()) {
    INFO(item.key());
    const auto& key = item.key();
    const auto& expected = golden.at("grad." + key);
    if (key.size() > 9 && key.compare(key.size() - 9, 9, ".key.bias") == 0) {
      // Zero in exact arithmetic (a key bias shifts a query's scores alike, which softmax
      // ignores): transformers' is rounding noise, compared against the scale of the query's.
      // xtrain's is exactly zero (model/vit/vit.h): no gradient at all.
      CHECK(!item.value().grad().defined());
      const auto query_bias = "grad." + key.substr(0, key.size() - 8) + "query.bias";
      CHECK(expected.abs().max().item<double>() <
            1e-5 * golden.at(query_bias).abs().max().item<double>());
      ++compared;
      continue;
    }
    const double error = testing::max_relative_error(item.value().grad(), expected);
    CHECK(error < 1e-5);
    grad_error = std::max(grad_error, error);
    ++compared;
  }
  CHECK(compared == 4 + 16 * 2 + 2 + 2);  // embeddings, two layers, the final norm, the classifier
  fmt::print("golden parity (vit, {} images): worst relative error: logits {:.2e}, loss {:.2e}, gradients {:.2e} "
             "({} tensors)\n",
             n, logits_error, loss_error, grad_error, compared);

  // xtrain's export loads back to the same logits.
  const std::string exported = (scratch.path() / "exported").string();
  ckpt::save_hf_folder(exported, *model, 0);
  auto reloaded = ckpt::load_hf_folder(exported);
  torch::NoGradGuard no_grad;
  CHECK(testing::max_relative_error(reloaded->logits(batch), model->logits(batch)) == 0);
}

TEST_CASE("ViT's AdamW steps stay as near the float64 trajectory as transformers' float32 run", "[model][golden][vit]") {
  testing::ScratchDir scratch;
  const std::string dir = (scratch.path() / "model").string();
  const std::string tool = fmt::format("{} {}/tools/reference/golden_vit.py", XTRAIN_PYTHON, XTRAIN_SOURCE_DIR);
  REQUIRE(std::system(fmt::format("{} make --out {} --seed 4", tool, dir).c_str()) == 0);
  torch::manual_seed(4);
  const int64_t n = 6;
  const auto pixels = torch::randn({n, 3, 12, 12});
  const auto labels = torch::randint(0, 5, {n}, torch::kInt64);
  const std::string batch_path = (scratch.path() / "batch.safetensors").string();
  const std::string out_path = (scratch.path() / "golden.safetensors").string();
  ckpt::save_safetensors(batch_path, {{"pixel_values", pixels}, {"labels", labels}});
  constexpr int kSteps = 3;
  constexpr double kLr = 1e-3, kWeightDecay = 1.0;
  REQUIRE(std::system(fmt::format("{} golden --checkpoint {} --batch {} --out {} --steps {} --lr {} --weight-decay {}",
                                  tool, dir, batch_path, out_path, kSteps, kLr, kWeightDecay)
                          .c_str()) == 0);
  auto golden = ckpt::load_safetensors(out_path).tensors;

  auto model = ckpt::load_hf_folder(dir);
  model::Batch batch;
  batch.input_ids = torch::zeros({n, 1}, torch::kInt64);
  batch.labels = labels.view({n, 1});
  batch.extra["pixel_values"] = pixels;
  testing::check_golden_adamw_steps(*model, "vit", batch, golden, {kSteps, kLr, kWeightDecay});
}

TEST_CASE("vit's config.json: a feature xtrain's ViT does not compute is refused", "[model][vit]") {
  const auto& spec = model::model_spec("vit");
  model::ModelConfig c;
  c.family = "vit";
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_heads = c.num_kv_heads = 4;
  c.intermediate_size = 64;
  c.vocab_size = 3;
  c.vision.image_size = 12;
  c.vision.patch_size = 4;
  auto json = spec.to_hf_config(c, 0);
  const auto back = spec.from_hf_config(json, "config.json");
  CHECK(back.vocab_size == 3);
  CHECK(back.max_seq_len == 10);
  CHECK(back.vision.num_patches() == 9);
  json["qkv_bias"] = false;
  REQUIRE_THROWS_WITH(spec.from_hf_config(json, "m/config.json"),
                      "m/config.json: qkv_bias is false; xtrain's ViT has query, key and value biases");
  json["qkv_bias"] = true;
  json["hidden_act"] = "gelu_new";
  REQUIRE_THROWS_WITH(spec.from_hf_config(json, "m/config.json"),
                      "m/config.json: hidden_act \"gelu_new\"; xtrain's ViT computes the exact GELU (\"gelu\")");
}

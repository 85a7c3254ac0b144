// CLIP against transformers' CLIPModel (tools/reference/golden_clip.py): a tiny random model that
// transformers writes loads into xtrain and gives the same logits per image, contrastive loss and
// gradients, under both of transformers' pooling rules (eos_token_id 2: the row's highest id;
// another: its first occurrence); after a step on those gradients, the folder xtrain exports
// loads into transformers, which scores it as xtrain does; config.json refuses what xtrain's
// CLIP does not compute.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "ckpt/hf_folder.h"
#include "ckpt/safetensors.h"
#include "model/clip/clip.h"
#include "model/spec/model_spec.h"
#include "scratch_dir.h"
#include "tensor_compare.h"
#include "train/training_loss.h"

using namespace xtrain;

namespace {

const std::string& clip_tool() {
  static const std::string command = fmt::format("{} {}/tools/reference/golden_clip.py", XTRAIN_PYTHON, XTRAIN_SOURCE_DIR);
  return command;
}

// Captions of random ids in [3, eos) with the end-of-text id at a random place, padding (1)
// after it; with `higher` an id above eos before it, which only the first-occurrence rule skips.
torch::Tensor clip_captions(int64_t n, int64_t length, int64_t eos, bool higher) {
  auto ids = torch::randint(3, eos, {n, length}, torch::kInt64);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t end = 2 + (i * 5) % (length - 2);
    ids[i][end] = eos;
    if (higher) ids[i][end - 1] = eos + 1;
    for (int64_t j = end + 1; j < length; ++j) ids[i][j] = 1;
  }
  return ids;
}


std::map<std::string, torch::Tensor> clip_golden(const std::string& folder, const model::Batch& batch,
                                                const std::filesystem::path& scratch, const std::string& tag) {
  const std::string batch_path = (scratch / (tag + "_batch.safetensors")).string();
  const std::string out_path = (scratch / (tag + "_golden.safetensors")).string();
  ckpt::save_safetensors(batch_path, {{"input_ids", batch.input_ids}, {"pixel_values", batch.extra.at("pixel_values")}});
  const auto command =
      fmt::format("{} golden --checkpoint {} --batch {} --out {}", clip_tool(), folder, batch_path, out_path);
  REQUIRE(std::system(command.c_str()) == 0);
  return ckpt::load_safetensors(out_path).tensors;
}

}  // namespace

TEST_CASE("CLIP's logits, contrastive loss and gradients match transformers' CLIPModel", "[model][golden][clip]") {
  for (const int64_t eos : {int64_t{2}, int64_t{90}}) {
    INFO("eos_token_id " << eos);
    testing::ScratchDir scratch;
    const std::string dir = (scratch.path() / "model").string();
    REQUIRE(std::system(fmt::format("{} make --out {} --seed 3 --eos {}", clip_tool(), dir, eos).c_str()) == 0);
    auto model = ckpt::load_hf_folder(dir);
    REQUIRE(model->config().family == "clip");
    REQUIRE(model->config().contrastive.eos_token_id == eos);
    auto& clip = dynamic_cast<model::ClipModel&>(*model);

    torch::manual_seed(3);
    const int64_t n = 6, length = 12;
    model::Batch batch;
    // With eos 2 the end-of-text is the row's highest id (98); with 90, an id above it precedes it.
    batch.input_ids = eos == 2 ? clip_captions(n, length, 98, false) : clip_captions(n, length, eos, true);
    batch.extra["pixel_values"] = torch::randn({n, 3, 12, 12});
    auto golden = clip_golden(dir, batch, scratch.path(), "a");

    auto loss = train::training_loss(*model, batch, 0).loss;
    const auto logits = clip.scores(batch).logits_per_image.detach();
    const double logits_error = testing::max_relative_error(logits, golden.at("logits_per_image"));
    const double loss_error = testing::max_relative_error(loss.detach(), golden.at("loss"));
    CHECK(logits_error < 1e-5);
    CHECK(loss_error < 1e-5);
    loss.backward();
    double grad_error = 0;
    int64_t compared = 0;
    for (const auto& item : model->named_parameters()) {
      INFO(item.key());
      const auto& key = item.key();
      const auto& expected = golden.at("grad." + key);
      if (key.size() > 12 && key.compare(key.size() - 12, 12, ".k_proj.bias") == 0) {
        // Zero in exact arithmetic (a key bias shifts a query's scores alike, which softmax
        // ignores): transformers' is rounding noise, compared against the scale of the query's;
        // xtrain's is exactly zero (model/clip/clip_vision.h): no gradient at all.
        CHECK(!item.value().grad().defined());
        const auto query_bias = "grad." + key.substr(0, key.size() - 11) + "q_proj.bias";
        CHECK(expected.abs().max().item<double>() < 1e-5 * golden.at(query_bias).abs().max().item<double>());
        ++compared;
        continue;
      }
      REQUIRE(item.value().grad().defined());
      const double error = testing::max_relative_error(item.value().grad(), expected);
      CHECK(error < 1e-5);
      grad_error = std::max(grad_error, error);
      ++compared;
    }
    // Text tower 2 + 16 x 2 + 2, image tower 5 + 16 x 2 + 2, two projections, logit_scale.
    CHECK(compared == 36 + 39 + 3);
    fmt::print("golden parity (clip, eos_token_id {}, {} pairs): worst relative error: logits_per_image {:.2e}, "
               "loss {:.2e}, gradients {:.2e} ({} tensors)\n",
               eos, n, logits_error, loss_error, grad_error, compared);

    // A step on those gradients, then the export: transformers loads it and scores it as xtrain.
    {
      torch::NoGradGuard no_grad;
      for (auto& p : model->parameters())
        if (p.grad().defined()) p.sub_(p.grad() * 0.05);
    }
    const double stepped = train::training_loss(*model, batch, 0).loss.item<double>();
    const std::string exported = (scratch.path() / "exported").string();
    ckpt::save_hf_folder(exported, *model, 0);
    const auto again = clip_golden(exported, batch, scratch.path(), "b");
    const double export_error = std::abs(again.at("loss").item<double>() - stepped) / std::abs(stepped);
    CHECK(export_error < 1e-5);
    fmt::print("clip export round trip (eos_token_id {}): loss {:.6f} before the step, {:.6f} after; transformers "
               "on the export {:.6f} (relative difference {:.2e})\n",
               eos, golden.at("loss").item<double>(), stepped, again.at("loss").item<double>(), export_error);
  }
}

TEST_CASE("clip's config.json: a feature xtrain's CLIP does not compute is refused", "[model][clip]") {
  const auto& spec = model::model_spec("clip");
  model::ModelConfig c;
  c.family = "clip";
  c.vocab_size = 100;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_heads = c.num_kv_heads = 4;
  c.intermediate_size = 64;
  c.max_seq_len = 16;
  c.vision = {40, 2, 4, 64, 12, 4};
  c.vision.projection_dim = 24;
  c.contrastive.eos_token_id = 99;
  auto json = spec.to_hf_config(c, 0);
  const auto back = spec.from_hf_config(json, "config.json");
  CHECK(back.vision.projection_dim == 24);
  CHECK(back.vision.num_patches() == 9);
  CHECK(back.contrastive.eos_token_id == 99);
  CHECK(back.max_seq_len == 16);
  json["text_config"]["hidden_act"] = "gelu";
  REQUIRE_THROWS_WITH(spec.from_hf_config(json, "m/config.json"),
                      "m/config.json text_config: hidden_act \"gelu\"; xtrain's CLIP computes quick_gelu");
  json["text_config"]["hidden_act"] = "quick_gelu";
  json.erase("vision_config");
  REQUIRE_THROWS_WITH(spec.from_hf_config(json, "m/config.json"),
                      "m/config.json: missing object \"vision_config\"; a CLIPModel config.json has one");
}

// T5 against transformers' T5ForConditionalGeneration (tools/reference/golden_t5.py): tiny random
// models that transformers writes, in T5 v1.0's style (ReLU, tied, scaled) and v1.1's (gated
// GELU, untied), load into xtrain and give the same logits, loss and gradients on a batch with
// encoder padding and unlabelled decoder positions; three steps of clipping and AdamW end as
// near the float64 trajectory as transformers' own float32 run does (the rule of
// golden_parity_test.cpp); the folder xtrain exports holds transformers' tensor names and loads
// back to the same logits; config.json refuses what xtrain's T5 does not compute.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "ckpt/hf_folder.h"
#include "ckpt/safetensors.h"
#include "model/golden_trajectory.h"
#include "model/spec/model_spec.h"
#include "model/t5/t5.h"
#include "scratch_dir.h"
#include "tensor_compare.h"
#include "train/training_loss.h"

using namespace xtrain;

namespace {

// Encoder rows of 14 tokens, two of them padded; decoder rows of 7, one with unlabelled
// positions; the decoder's inputs are the labels shifted right behind the start id 0.
model::Batch t5_batch(const std::string& path) {
  torch::manual_seed(7);
  const int64_t b = 3, s = 14, t = 7;
  auto ids = torch::randint(2, 97, {b, s}, torch::kInt64);
  auto attention_mask = torch::ones({b, s}, torch::kInt64);
  attention_mask[1].narrow(0, 10, 4).zero_();
  attention_mask[2].narrow(0, 6, 8).zero_();
  ids.masked_fill_(attention_mask.eq(0), 0);
  auto labels = torch::randint(2, 97, {b, t}, torch::kInt64);
  labels[2].narrow(0, 5, 2).fill_(-100);
  auto decoder_ids = torch::zeros({b, t}, torch::kInt64);
  decoder_ids.narrow(1, 1, t - 1).copy_(labels.narrow(1, 0, t - 1).clamp_min(0));
  ckpt::save_safetensors(path, {{"input_ids", ids},
                                {"attention_mask", attention_mask},
                                {"decoder_input_ids", decoder_ids},
                                {"labels", labels}});
  model::Batch batch;
  batch.input_ids = ids;
  batch.decoder_input_ids = decoder_ids;
  batch.labels = labels;
  batch.extra["attention_mask"] = attention_mask;
  return batch;
}

constexpr int kSteps = 3;
constexpr double kLr = 1e-3, kWeightDecay = 1.0;

}  // namespace

TEST_CASE("T5's logits, loss, gradients and AdamW steps match transformers' T5ForConditionalGeneration, v1.0 and "
          "v1.1",
          "[model][golden][t5]") {
  const std::string style = GENERATE("v1.0", "v1.1");
  INFO("style " << style);
  testing::ScratchDir scratch;
  const std::string dir = (scratch.path() / "model").string();
  const std::string tool = fmt::format("{} {}/tools/reference/golden_t5.py", XTRAIN_PYTHON, XTRAIN_SOURCE_DIR);
  REQUIRE(std::system(fmt::format("{} make --style {} --out {} --seed 3", tool, style, dir).c_str()) == 0);
  auto model = ckpt::load_hf_folder(dir);
  const auto& c = model->config();
  REQUIRE(c.family == "t5");
  CHECK(c.tie_embeddings == (style == "v1.0"));
  CHECK(c.encoder_decoder.gated_gelu == (style == "v1.1"));
  CHECK(c.encoder_decoder.decoder_depth(c.num_layers) == 3);
  CHECK(c.head_dim() == 8);

  const std::string batch_path = (scratch.path() / "batch.safetensors").string();
  const std::string out_path = (scratch.path() / "golden.safetensors").string();
  const auto batch = t5_batch(batch_path);
  REQUIRE(std::system(fmt::format("{} golden --checkpoint {} --batch {} --out {} --steps {} --lr {} --weight-decay {}",
                                  tool, dir, batch_path, out_path, kSteps, kLr, kWeightDecay)
                          .c_str()) == 0);
  auto golden = ckpt::load_safetensors(out_path).tensors;

  const double logits_error = testing::max_relative_error(model->logits(batch).detach(), golden.at("logits"));
  CHECK(logits_error < 1e-5);
  // The chunked loss (chunks of 5 tokens) and the plain one.
  double loss_error = 0, grad_error = 0;
  int64_t compared = 0;
  for (const int64_t chunk : {0, 5}) {
    INFO("loss chunk " << chunk);
    for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
    auto loss = train::next_token_loss_of_hidden(*model, model->forward(batch).hidden, batch.labels, chunk);
    loss_error = std::max(loss_error, testing::max_relative_error(loss.detach(), golden.at("loss")));
    CHECK(loss_error < 1e-5);
    loss.backward();
    compared = 0;
    for (const auto& item : model->named_parameters()) {
      INFO(item.key());
      REQUIRE(golden.count("grad." + item.key()) == 1);
      const double error = testing::max_relative_error(item.value().grad(), golden.at("grad." + item.key()));
      CHECK(error < 1e-5);
      grad_error = std::max(grad_error, error);
      ++compared;
    }
  }
  int64_t golden_gradients = 0;
  for (const auto& [name, tensor] : golden) golden_gradients += name.rfind("grad.", 0) == 0 ? 1 : 0;
  CHECK(compared == golden_gradients);  // transformers' model has exactly xtrain's parameters
  // shared, 2 encoder blocks of 4 + 1 + 2 or 3 + 1, 3 decoder blocks of 4 + 1 + 4 + 1 + 2 or 3 + 1,
  // two position tables, two final norms, and v1.1's lm_head.
  CHECK(compared == (style == "v1.0" ? 1 + 2 * 8 + 3 * 13 + 2 + 2 : 1 + 2 * 9 + 3 * 14 + 2 + 2 + 1));
  fmt::print("golden parity (t5 {}): worst relative error: logits {:.2e}, loss {:.2e}, gradients {:.2e} ({} tensors)\n",
             style, logits_error, loss_error, grad_error, compared);

  // AdamW steps, held to transformers' own float32 distance from the float64 run.
  testing::check_golden_adamw_steps(*model, "t5 " + style, batch, golden, {kSteps, kLr, kWeightDecay});

  // xtrain's export holds the tensors transformers wrote, under the same names, and loads back
  // to the same logits.
  const std::string exported = (scratch.path() / "exported").string();
  ckpt::save_hf_folder(exported, *model, 1);
  std::set<std::string> written, expected;
  for (const auto& [name, tensor] : ckpt::load_safetensors(exported + "/model.safetensors").tensors) written.insert(name);
  for (const auto& [name, tensor] : ckpt::load_safetensors(dir + "/model.safetensors").tensors) expected.insert(name);
  CHECK(written == expected);
  auto reloaded = ckpt::load_hf_folder(exported);
  CHECK(reloaded->config().tie_embeddings == c.tie_embeddings);
  CHECK(reloaded->config().encoder_decoder.gated_gelu == c.encoder_decoder.gated_gelu);
  torch::NoGradGuard no_grad;
  CHECK(testing::max_relative_error(reloaded->logits(batch), model->logits(batch)) == 0);
}

TEST_CASE("T5's relative position buckets are Mesh TensorFlow's", "[model][t5]") {
  // Offsets -12 .. 12 over 8 buckets up to a distance of 10 (bidirectional: 4 a side, 2 exact,
  // then log-spaced; causal: 8 for the past, 4 exact); values as transformers' T5Attention._relative_position_bucket gives them.
  const auto offsets = torch::arange(-12, 13, torch::kInt64);
  const auto both = model::relative_position_bucket(offsets, true, 8, 10);
  const auto past = model::relative_position_bucket(offsets, false, 8, 10);
  const std::vector<int64_t> expected_both = {3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 1, 0, 5, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7};
  const std::vector<int64_t> expected_past = {7, 7, 7, 7, 7, 6, 5, 4, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  CHECK(std::vector<int64_t>(both.data_ptr<int64_t>(), both.data_ptr<int64_t>() + 25) == expected_both);
  CHECK(std::vector<int64_t>(past.data_ptr<int64_t>(), past.data_ptr<int64_t>() + 25) == expected_past);
}

TEST_CASE("t5's config.json: a feature xtrain's T5 does not compute is refused", "[model][t5]") {
  const auto& spec = model::model_spec("t5");
  model::ModelConfig c;
  c.family = "t5";
  c.vocab_size = 97;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_heads = c.num_kv_heads = 4;
  c.head_dim_override = 8;
  c.intermediate_size = 64;
  c.encoder_decoder.gated_gelu = true;
  auto json = spec.to_hf_config(c, 1);
  const auto back = spec.from_hf_config(json, "config.json");
  CHECK(back.encoder_decoder.gated_gelu);
  CHECK(!back.tie_embeddings);
  CHECK(back.encoder_decoder.decoder_depth(back.num_layers) == 2);
  json["feed_forward_proj"] = "gated-silu";
  REQUIRE_THROWS_WITH(spec.from_hf_config(json, "m/config.json"),
                      "m/config.json: feed_forward_proj \"gated-silu\"; xtrain's T5 computes \"relu\" (T5 v1.0) or "
                      "\"gated-gelu\" (T5 v1.1)");
  // transformers 5 writes tie_word_embeddings true for v1.1 and says scale_decoder_outputs false.
  json["feed_forward_proj"] = "gated-gelu";
  json["tie_word_embeddings"] = true;
  CHECK(!spec.from_hf_config(json, "config.json").tie_embeddings);
  json.erase("scale_decoder_outputs");
  CHECK(spec.from_hf_config(json, "config.json").tie_embeddings);
}

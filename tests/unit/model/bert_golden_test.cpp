// BERT against transformers' BertForMaskedLM (tools/reference/golden_mlm.py): the folder xtrain
// exports gives the same logits, masked-LM loss and gradients on a batch with padding; a packed
// row of two documents computes what each document computes alone.
#include <catch2/catch.hpp>

#include <cstdlib>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ckpt/hf_folder.h"
#include "ckpt/safetensors.h"
#include "model/bert/bert.h"
#include "model/model_builder.h"
#include "model/spec/model_spec.h"
#include "model/layers/sequence_layout.h"
#include "scratch_dir.h"
#include "tensor_compare.h"
#include "train/training_loss.h"

using namespace xtrain;

namespace {

model::ModelConfig small_bert() {
  model::ModelConfig c;
  c.family = "bert";
  c.vocab_size = 97;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_heads = c.num_kv_heads = 4;
  c.intermediate_size = 64;
  c.max_seq_len = 40;
  c.norm_eps = 1e-12;
  c.tie_embeddings = true;
  return c;
}

// Biases start at 0 and LayerNorm gains at 1: give them values, so that they are tested.
std::shared_ptr<model::CausalLM> small_bert_model(uint64_t seed) {
  auto model = model::build_model(small_bert(), seed);
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters())
    if (p.dim() == 1) p.add_(torch::randn_like(p) * 0.1);
  return model;
}

}  // namespace

TEST_CASE("BERT's logits, masked-LM loss and gradients match transformers' BertForMaskedLM, with padding",
          "[model][golden][bert]") {
  testing::ScratchDir scratch;
  const std::string dir = (scratch.path() / "model").string();
  torch::manual_seed(5);
  auto model = small_bert_model(5);
  ckpt::save_hf_folder(dir, *model, 3);
  const int64_t b = 3, t = 12;
  auto ids = torch::randint(1, 97, {b, t}, torch::kInt64);
  auto attention_mask = torch::ones({b, t}, torch::kInt64);
  attention_mask[1].narrow(0, 8, 4).zero_();
  attention_mask[2].narrow(0, 5, 7).zero_();
  ids.masked_fill_(attention_mask.eq(0), 0);  // [PAD]
  auto labels = torch::where(torch::rand({b, t}).lt(0.3).logical_and(attention_mask.ne(0)), ids,
                             torch::full({b, t}, -100, torch::kInt64));
  labels[0][0] = ids[0][0];  // at least one labelled position in the batch
  const std::string batch_path = (scratch.path() / "batch.safetensors").string();
  const std::string out_path = (scratch.path() / "golden.safetensors").string();
  ckpt::save_safetensors(batch_path, {{"input_ids", ids}, {"attention_mask", attention_mask}, {"labels", labels}});
  const std::string command = fmt::format("{} {}/tools/reference/golden_mlm.py --checkpoint {} --batch {} --out {}",
                                          XTRAIN_PYTHON, XTRAIN_SOURCE_DIR, dir, batch_path, out_path);
  REQUIRE(std::system(command.c_str()) == 0);
  auto golden = ckpt::load_safetensors(out_path).tensors;

  model::Batch batch;
  batch.input_ids = ids;
  batch.labels = labels;
  batch.extra["attention_mask"] = attention_mask;
  const auto logits = model->logits(batch).detach();
  // Padded positions' logits are never read (no loss, no prediction): compare the others.
  const auto real = attention_mask.ne(0);
  const double logits_error =
      testing::max_relative_error(logits.index({real}), golden.at("logits").index({real}));
  CHECK(logits_error < 1e-5);
  // The chunked loss (chunks of 7 tokens) and the plain one.
  const int64_t chunk = GENERATE(0, 7);
  INFO("loss chunk " << chunk);
  auto loss = train::next_token_loss_of_hidden(*model, model->forward(batch).hidden, labels, chunk);
  const double loss_error = testing::max_relative_error(loss.detach(), golden.at("loss"));
  CHECK(loss_error < 1e-5);
  loss.backward();
  double grad_error = 0;
  int64_t compared = 0;
  for (const auto& item : model->named_parameters()) {
    INFO(item.key());
    const auto& expected = golden.at("grad." + item.key());
    if (item.key().find(".attention.self.key.bias") != std::string::npos) {
      // Zero in exact arithmetic (a key bias shifts a query's scores alike, which softmax
      // ignores): both sides are rounding noise, compared against the scale of the query's.
      const double scale = golden.at("grad." + item.key().substr(0, item.key().size() - 8) + "query.bias").abs().max().item<double>();
      CHECK((item.value().grad() - expected).abs().max().item<double>() < 1e-5 * scale);
      ++compared;
      continue;
    }
    const double error = testing::max_relative_error(item.value().grad(), expected);
    CHECK(error < 1e-5);
    grad_error = std::max(grad_error, error);
    ++compared;
  }
  CHECK(compared == 5 + 16 * 2 + 5);  // embeddings, two layers, the head (its decoder tied)
  fmt::print("golden parity (bert, padded batch, loss chunk {}): worst relative error: logits {:.2e}, loss {:.2e}, "
             "gradients {:.2e} ({} tensors)\n",
             chunk, logits_error, loss_error, grad_error, compared);
}

TEST_CASE("a packed BERT row computes each of its documents as if alone", "[model][bert]") {
  auto model = small_bert_model(9);
  torch::NoGradGuard no_grad;
  auto ids = torch::randint(1, 97, {1, 11}, torch::kInt64);
  model::Batch packed;
  packed.input_ids = ids;
  packed.layout = model::packed_layout(torch::tensor({0, 4, 11}, torch::kInt64));
  const auto together = model->forward(packed).hidden;
  for (const auto& [start, length] : {std::pair<int64_t, int64_t>{0, 4}, {4, 7}}) {
    model::Batch alone;
    alone.input_ids = ids.narrow(1, start, length);
    const auto expected = model->forward(alone).hidden;
    CHECK(testing::max_relative_error(together.narrow(1, start, length), expected) < 1e-5);
  }
}

TEST_CASE("bert's config.json: a feature xtrain's BERT does not compute is refused", "[model][bert]") {
  const auto& spec = model::model_spec("bert");
  auto json = spec.to_hf_config(small_bert(), 3);
  CHECK(spec.from_hf_config(json, "config.json").hidden_size == 32);
  json["position_embedding_type"] = "relative_key";
  REQUIRE_THROWS_WITH(spec.from_hf_config(json, "m/config.json"),
                      "m/config.json: position_embedding_type \"relative_key\"; xtrain's BERT has absolute positions");
}

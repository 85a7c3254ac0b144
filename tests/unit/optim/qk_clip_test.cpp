// QK-clip (optim/qk_clip.h) against tools/reference/qk_clip.py (torch with transformers' rotary
// and repeat_kv) on the same weights and inputs: each head's largest logit as the eager kernel
// records it in a training forward, the clipped q and k projections (weights and biases, here
// held as two pieces each split mid-head, as FSDP's are), and the logits after the clip, which
// are tau for a clipped head whose gamma its key head took. An eval forward records nothing.
#include <cstdlib>
#include <limits>

#include <fmt/format.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "ckpt/safetensors.h"
#include "model/attention/attention.h"
#include "optim/qk_clip.h"
#include "scratch_dir.h"

using namespace xtrain;

namespace qk_clip_test {

constexpr int64_t kHidden = 32, kHeads = 4, kKvHeads = 2, kSeq = 12;

model::Attention make_attention() {
  model::ModelConfig config;
  config.hidden_size = kHidden;
  config.num_heads = kHeads;
  config.num_kv_heads = kKvHeads;
  config.max_seq_len = kSeq;
  model::AttentionFeatures features;
  features.qkv_bias = true;
  model::Attention attention(config, features);
  torch::NoGradGuard no_grad;
  torch::manual_seed(7);
  // Heads 1 and 3 (one in each key group) reach larger logits than 0 and 2.
  const auto gain = torch::tensor({1.0f, 3.0f, 1.0f, 3.0f}).repeat_interleave(kHidden / kHeads).unsqueeze(1);
  for (auto* linear : {&attention->q_proj, &attention->k_proj, &attention->v_proj, &attention->o_proj}) {
    // The layer's tensors may be placeholders until an init plan runs: replace them.
    (*linear)->weight.set_data(torch::randn((*linear)->weight.sizes()) * 0.3);
    if ((*linear)->bias.defined()) (*linear)->bias.set_data(torch::randn((*linear)->bias.sizes()) * 0.1);
  }
  attention->q_proj->weight.mul_(gain);
  return attention;
}

ckpt::TensorMap run_reference(const torch::Tensor& x, model::AttentionImpl& a) {
  ckpt::TensorMap in{{"x", x},
                     {"q_weight", a.q_proj->weight.detach()},
                     {"q_bias", a.q_proj->bias.detach()},
                     {"k_weight", a.k_proj->weight.detach()},
                     {"k_bias", a.k_proj->bias.detach()},
                     {"hyper", torch::tensor(std::vector<double>{kHeads, kKvHeads, 10000.0}, torch::kFloat64)}};
  testing::ScratchDir scratch;
  const auto inputs = (scratch.path() / "in.safetensors").string(), out = (scratch.path() / "out.safetensors").string();
  ckpt::save_safetensors(inputs, in);
  const auto command = fmt::format("{} {}/tools/reference/qk_clip.py --inputs {} --out {}", XTRAIN_PYTHON,
                                   XTRAIN_SOURCE_DIR, inputs, out);
  REQUIRE(std::system(command.c_str()) == 0);
  return ckpt::load_safetensors(out).tensors;
}

double relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
  const auto a64 = a.to(torch::kFloat64), b64 = b.to(torch::kFloat64);
  return ((a64 - b64).abs() / b64.abs().clamp_min(1e-12)).max().item<double>();
}

// `tensor` (whole, flattened) as two pieces cut at `cut`, as two FSDP ranks hold it.
std::vector<optim::QkClipPiece> two_pieces(const torch::Tensor& tensor, int64_t cut) {
  auto flat = tensor.detach().view(-1);
  return {{flat.narrow(0, 0, cut), 0, flat.numel()}, {flat.narrow(0, cut, flat.numel() - cut), cut, flat.numel()}};
}

}  // namespace qk_clip_test

namespace qk_case = qk_clip_test;

TEST_CASE("qk-clip: recorded logits and clipped projections equal the torch reference", "[qk_clip]") {
  auto attention = qk_case::make_attention();
  const auto rotary = model::rotary_tables(qk_case::kSeq, qk_case::kHidden / qk_case::kHeads, 10000.0);
  torch::manual_seed(11);
  const auto x = torch::randn({2, qk_case::kSeq, qk_case::kHidden});
  const auto expected = qk_case::run_reference(x, *attention);
  const double tau = expected.at("tau").item<double>();

  attention->record_logit_max(true);
  attention->eval();
  attention->forward(x, rotary);
  CHECK(torch::isinf(attention->take_logit_max()).all().item<bool>());  // eval forwards are not recorded
  attention->train();
  attention->forward(x, rotary);
  // Two micro batches of one step: the record keeps the larger.
  attention->forward(x.narrow(0, 0, 1), rotary);
  std::vector<optim::QkClipLayer> layers;
  layers.push_back({"self_attn", qk_case::kHeads, qk_case::kKvHeads, [&] { return attention->take_logit_max(); },
                    {}, {}});
  // Cuts inside a head's rows (row 3 of head 0 of q; the bias mid-head too), as FSDP's pieces fall.
  auto& layer = layers.back();
  for (auto& piece : qk_case::two_pieces(attention->q_proj->weight, 3 * qk_case::kHidden + 5))
    layer.query.push_back(piece);
  for (auto& piece : qk_case::two_pieces(attention->q_proj->bias, 11)) layer.query.push_back(piece);
  for (auto& piece : qk_case::two_pieces(attention->k_proj->weight, 9 * qk_case::kHidden + 1))
    layer.key.push_back(piece);
  for (auto& piece : qk_case::two_pieces(attention->k_proj->bias, 3)) layer.key.push_back(piece);
  torch::Tensor seen;
  optim::QkClip clip(std::move(layers), tau, [&](torch::Tensor& t) { seen = t.clone(); }, torch::kCPU);
  const auto stats = clip.apply();

  const double logit_error = qk_case::relative_difference(seen, expected.at("logit_max"));
  INFO("largest logits " << seen << " reference " << expected.at("logit_max") << " tau " << tau);
  CHECK(logit_error < 1e-5);
  CHECK(stats.heads_clipped == 2);
  CHECK(stats.max_logit == Approx(expected.at("logit_max").max().item<double>()).epsilon(1e-5));
  for (const auto* name : {"q_weight", "q_bias", "k_weight", "k_bias"}) {
    const auto& module = name[0] == 'q' ? attention->q_proj : attention->k_proj;
    const auto& mine = std::string(name).find("weight") != std::string::npos ? module->weight : module->bias;
    INFO(name);
    CHECK(qk_case::relative_difference(mine.detach(), expected.at(name)) < 1e-6);
  }
  attention->forward(x, rotary);
  const auto after = attention->take_logit_max();
  INFO("after the clip " << after << " reference " << expected.at("logit_max_after"));
  CHECK(qk_case::relative_difference(after, expected.at("logit_max_after")) < 1e-5);
  CHECK(after.max().item<double>() <= tau * (1 + 1e-5));
}

TEST_CASE("qk-clip: a shared key head takes the smallest gamma of its query heads", "[qk_clip]") {
  const auto logits = torch::tensor({4.0, 10.0, 2.0, 5.0});
  const auto [query, key] = optim::qk_clip_gammas(logits, 5.0, 2);
  CHECK(query[0].item<double>() == 1.0);
  CHECK(query[1].item<double>() == Approx(0.5));
  CHECK(query[3].item<double>() == 1.0);  // at tau: not clipped
  CHECK(key[0].item<double>() == Approx(0.5));
  CHECK(key[1].item<double>() == 1.0);
}

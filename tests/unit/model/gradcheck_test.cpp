#include <catch2/catch.hpp>

#include "model/attention/attention.h"
#include "model/llama.h"
#include "model/layers/parameter_source.h"
#include "model/small_llama.h"
#include "model/layers/rms_norm.h"
#include "model/layers/rotary.h"
#include "model/layers/swiglu.h"
#include "model/gradcheck.h"

using namespace xtrain;
using xtrain::testing::max_gradcheck_error;

TEST_CASE("fp64 finite differences: causal attention with grouped kv heads", "[model][gradcheck]") {
  torch::manual_seed(1);
  auto error = max_gradcheck_error(
      [](const std::vector<torch::Tensor>& in) { return model::causal_attention(in[0], in[1], in[2]); },
      {torch::randn({2, 4, 5, 6}), torch::randn({2, 2, 5, 6}), torch::randn({2, 2, 5, 6})});
  CHECK(error < 1e-6);
}

TEST_CASE("fp64 finite differences: rotary embedding", "[model][gradcheck]") {
  torch::manual_seed(2);
  auto tables = model::rotary_tables(7, 8, 10000.0);
  auto cos = tables.cos.to(torch::kFloat64), sin = tables.sin.to(torch::kFloat64);
  auto error = max_gradcheck_error(
      [&](const std::vector<torch::Tensor>& in) { return model::apply_rotary(in[0], cos, sin); },
      {torch::randn({2, 3, 7, 8})});
  CHECK(error < 1e-6);
}

// The modules read their weights through public members, so rebinding a member to a test
// input differentiates the module's own code with respect to that weight.
TEST_CASE("fp64 finite differences: RMSNorm input and gain", "[model][gradcheck]") {
  torch::manual_seed(3);
  model::RMSNorm norm(6, 1e-5);
  auto error = max_gradcheck_error(
      [&](const std::vector<torch::Tensor>& in) {
        norm->weight = in[1];
        return norm(in[0]);
      },
      {torch::randn({3, 6}), torch::randn({6})});
  CHECK(error < 1e-6);
}

TEST_CASE("fp64 finite differences: SwiGLU input and weights", "[model][gradcheck]") {
  torch::manual_seed(4);
  model::SwiGLU mlp(5, 7);
  auto error = max_gradcheck_error(
      [&](const std::vector<torch::Tensor>& in) {
        mlp->gate_proj->weight = in[1];
        mlp->up_proj->weight = in[2];
        mlp->down_proj->weight = in[3];
        return mlp(in[0]);
      },
      {torch::randn({4, 5}), torch::randn({7, 5}), torch::randn({7, 5}), torch::randn({5, 7})});
  CHECK(error < 1e-6);
}

TEST_CASE("fp64 finite differences: a whole decoder layer", "[model][gradcheck]") {
  torch::manual_seed(5);
  const auto config = testing::SmallLlama{11, 8, 1, 2, 1, 12, 4}.config();
  model::DecoderLayer layer(config, model::AttentionFeatures{});
  model::materialize(*layer, [](const std::string&, int64_t, int64_t count) { return torch::randn({count}); });
  layer->to(torch::kFloat64);
  auto tables = model::rotary_tables(4, config.head_dim(), config.rope_theta);
  model::RotaryTables rotary{tables.cos.to(torch::kFloat64), tables.sin.to(torch::kFloat64)};
  auto error = max_gradcheck_error(
      [&](const std::vector<torch::Tensor>& in) { return layer->forward(in[0], rotary); },
      {torch::randn({2, 4, 8})});
  CHECK(error < 1e-6);
}

// Which layers precision.fp8 converts (model::apply_float8): every linear layer of a family
// except the output head and the gates, and every expert block, under its module name. The
// families hand their layers over themselves; the module-tree walk below, in the test only, is
// the reference they must agree with.
#include <set>
#include <string>
#include <vector>

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "model/causal_lm.h"
#include "model/layers/float8_linear.h"
#include "model/layers/linear.h"
#include "model/layers/moe.h"
#include "model/model_builder.h"
#include "model/small_llama.h"
#include "model/spec/model_spec.h"

using namespace xtrain;

namespace {

std::set<std::string> names_of(const model::Float8Weights& weights) {
  std::set<std::string> names;
  for (const auto& [name, block] : weights) names.insert(name);
  return names;
}

bool ends_with(const std::string& name, const std::string& tail) {
  return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
}

// Every linear layer but the head (lm_head, vit's classifier) and the shared experts' gate, and
// every expert block, found by
// walking the module tree: what apply_float8 must convert, and whether the recipe reached it.
struct WalkedLayers {
  std::set<std::string> weights;
  std::set<std::string> without_recipe;  // of those, the ones whose layer has no recipe set
  std::set<std::string> high_precision_with_recipe;  // head and gates that have one
};
WalkedLayers walk(torch::nn::Module& model) {
  WalkedLayers walked;
  for (const auto& item : model.named_modules()) {
    const auto& name = item.key();
    if (const auto* linear = item.value()->as<model::LinearImpl>()) {
      if (ends_with(name, "lm_head") || name == "classifier" || ends_with(name, "shared_expert_gate")) {
        if (linear->float8) walked.high_precision_with_recipe.insert(name);
        continue;
      }
      walked.weights.insert(name + ".weight");
      if (!linear->float8) walked.without_recipe.insert(name);
    } else if (const auto* moe = item.value()->as<model::MoeBlockImpl>()) {
      walked.weights.insert(name + ".experts.gate_up_proj");
      walked.weights.insert(name + ".experts.down_proj");
      if (!moe->float8) walked.without_recipe.insert(name);
    }
  }
  return walked;
}

model::Float8Recipe tensorwise() { return {model::Float8Scaling::tensorwise}; }

// A small model of each family, with the parts that carry extra linear layers switched on:
// DeepSeek's latent attention and a prediction depth, shared experts with their gate.
model::ModelConfig small_config(const model::ModelSpec& spec) {
  testing::SmallLlama shape;
  const bool own_shape = spec.family == "bert" || spec.family == "llava" || spec.family == "vit" || spec.family == "clip";
  shape.family = own_shape ? "llama" : spec.family;
  if (spec.capabilities.experts) shape.with_experts(24);
  if (spec.family == "mixtral" || spec.family == "gpt_oss") shape.first_k_dense = 0;
  if (spec.family == "deepseek_v3" || spec.family == "bert" || spec.family == "vit" || spec.family == "clip")
    shape.kv_heads = shape.heads;
  auto c = shape.config();
  c.family = spec.family;
  if (spec.family == "deepseek_v3") {
    c.latent = {16, 24, 8, 4, 6, false};
    c.router = model::Router::sigmoid_bias;
    c.num_shared_experts = 2;
    c.mtp_layers = 1;
  }
  if (spec.family == "qwen3_moe") {
    c.num_shared_experts = 1;
    c.shared_expert_gate = true;
  }
  if (spec.family == "vit") {
    c.vision.image_size = 12;
    c.vision.patch_size = 4;
  }
  if (spec.family == "clip") {  // its image tower's shape
    c.tie_embeddings = false;
    c.vision.hidden_size = 24;
    c.vision.num_layers = 2;
    c.vision.num_heads = 4;
    c.vision.intermediate_size = 48;
    c.vision.image_size = 12;
    c.vision.patch_size = 4;
    c.vision.projection_dim = 16;
  }
  if (spec.family == "llava") {
    auto& v = c.vision;
    v.hidden_size = 24;
    v.num_layers = 2;
    v.num_heads = 4;
    v.intermediate_size = 48;
    v.image_size = 30;
    v.patch_size = 10;
    v.image_token_index = c.vocab_size - 1;
    v.image_seq_length = v.features_per_image();
  }
  return c;
}

}  // namespace

TEST_CASE("FP8 converts a tiny llama's attention and MLP projections, not its output head", "[model][float8]") {
  const auto model = model::declare_model(testing::SmallLlama{}.config());
  const auto converted = model::apply_float8(*model, tensorwise());
  std::set<std::string> expected;
  for (const std::string layer : {"model.layers.0.", "model.layers.1."})
    for (const std::string part : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                   "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"})
      expected.insert(layer + part + ".weight");
  CHECK(names_of(converted) == expected);
  for (const auto& [name, block] : converted) CHECK((block.rows == 0 && block.cols == 0));
  CHECK_FALSE(model::apply_float8(*model, {}).size());  // precision.fp8 off converts nothing
}

TEST_CASE("FP8 converts a tiny qwen3_moe's projections and experts, not its router, gate or head",
          "[model][float8]") {
  auto config = testing::SmallLlama{}.with_experts(24).config();
  config.family = "qwen3_moe";
  config.num_shared_experts = 1;
  config.shared_expert_gate = true;
  const auto model = model::declare_model(config);
  const auto converted = model::apply_float8(*model, {model::Float8Scaling::blockwise});
  const std::set<std::string> expected = {
      "model.layers.0.self_attn.q_proj.weight",
      "model.layers.0.self_attn.k_proj.weight",
      "model.layers.0.self_attn.v_proj.weight",
      "model.layers.0.self_attn.o_proj.weight",
      "model.layers.0.mlp.gate_proj.weight",
      "model.layers.0.mlp.up_proj.weight",
      "model.layers.0.mlp.down_proj.weight",
      "model.layers.1.self_attn.q_proj.weight",
      "model.layers.1.self_attn.k_proj.weight",
      "model.layers.1.self_attn.v_proj.weight",
      "model.layers.1.self_attn.o_proj.weight",
      "model.layers.1.mlp.experts.gate_up_proj",
      "model.layers.1.mlp.experts.down_proj",
      "model.layers.1.mlp.shared_experts.gate_proj.weight",
      "model.layers.1.mlp.shared_experts.up_proj.weight",
      "model.layers.1.mlp.shared_experts.down_proj.weight",
  };
  CHECK(names_of(converted) == expected);
  // Blockwise: the forward quantizes W in 128 x 128 blocks, which an FSDP unit gathers in.
  for (const auto& [name, block] : converted) CHECK((block.rows == 128 && block.cols == 128));
}

TEST_CASE("every family hands FP8 every linear layer but its head and gates, and every expert block",
          "[model][float8]") {
  for (const auto& spec : model::model_specs()) {
    INFO(spec.family);
    const auto model = model::declare_model(small_config(spec));
    const auto converted = model::apply_float8(*model, tensorwise());
    const auto walked = walk(*model);
    CHECK(names_of(converted) == walked.weights);
    CHECK(walked.without_recipe.empty());
    CHECK(walked.high_precision_with_recipe.empty());
  }
}

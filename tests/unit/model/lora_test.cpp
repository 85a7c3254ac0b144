// LoRA adapters on the linear layers (model/layers/lora.h): the product PEFT computes, the
// names PEFT gives, the init plan, and an adapted model that starts as its base.
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "model/layers/linear.h"
#include "model/layers/lora.h"
#include "model/layers/parameter_init.h"
#include "model/layers/parameter_source.h"
#include "small_llama.h"

namespace {

using xtrain::model::LoraConfig;

torch::Tensor seeded(const std::string& name, int64_t begin, int64_t count) {
  torch::manual_seed(static_cast<uint64_t>(std::hash<std::string>{}(name) % 100000));
  return torch::randn({begin + count}).narrow(0, begin, count);
}

}  // namespace

TEST_CASE("a Linear with an adapter adds scale (x A^T) B^T, and only A and B need gradients", "[lora]") {
  xtrain::model::Linear linear(6, 5, /*bias=*/true);
  linear->add_adapter(/*rank=*/3, /*scale=*/2.5);
  xtrain::model::materialize(*linear, seeded);  // B random too, so the term is not zero
  linear->weight.requires_grad_(false);
  linear->bias.requires_grad_(false);
  const auto x = torch::randn({2, 4, 6});
  const auto a = linear->lora_A->weight, b = linear->lora_B->weight;
  const auto expected = torch::matmul(x, linear->weight.t()) + linear->bias +
                        torch::matmul(torch::matmul(x, a.t()), b.t()) * 2.5;
  const auto y = linear(x);
  CHECK(torch::allclose(y, expected, 1e-6, 1e-6));
  y.sum().backward();
  CHECK(a.grad().defined());
  CHECK(b.grad().defined());
  CHECK_FALSE(linear->weight.grad().defined());
}

TEST_CASE("adapters take PEFT's names, start at B = 0 and leave the model's output unchanged", "[lora]") {
  xtrain::testing::SmallLlama shape;
  const auto config = shape.config();
  auto base = xtrain::model::build_model(config, 5);
  auto adapted = xtrain::model::declare_model(config);
  const LoraConfig lora{4, 8.0, 0.0, {"q_proj", "down_proj"}};
  CHECK(xtrain::model::add_lora_adapters(*adapted, lora, adapted->adapter_dropout_key()) == 2 * shape.layers);
  const auto plan = adapted->init_plan();
  REQUIRE(plan.count("model.layers.1.self_attn.q_proj.lora_A.weight") == 1);
  CHECK(plan.at("model.layers.1.mlp.down_proj.lora_B.weight").kind == xtrain::model::ParameterInit::Kind::zeros);
  CHECK(plan.count("model.layers.0.self_attn.k_proj.lora_A.weight") == 0);
  xtrain::model::materialize(*adapted, xtrain::model::init_source(plan, 5));
  const auto params = adapted->named_parameters();
  CHECK(params["model.layers.0.self_attn.q_proj.lora_A.weight"].sizes() == torch::IntArrayRef({4, shape.hidden}));
  CHECK(params["model.layers.0.mlp.down_proj.lora_B.weight"].sizes() == torch::IntArrayRef({shape.hidden, 4}));
  CHECK(adapted->num_parameters() ==
        base->num_parameters() + shape.layers * 4 * (2 * shape.hidden + shape.intermediate + shape.hidden));
  // The base's weights are drawn by name: the same in both, and B = 0 adds nothing.
  xtrain::model::Batch batch;
  batch.input_ids = torch::randint(shape.vocab, {2, 8});
  torch::NoGradGuard no_grad;
  CHECK(torch::equal(adapted->logits(batch), base->logits(batch)));
}

TEST_CASE("a target that names no linear layer is refused", "[lora]") {
  auto model = xtrain::model::declare_model(xtrain::testing::SmallLlama{}.config());
  CHECK_THROWS_WITH(xtrain::model::add_lora_adapters(*model, LoraConfig{4, 8.0, 0.0, {"q_proj", "qkv_proj"}}, model->adapter_dropout_key()),
                    "model.lora.targets: 'qkv_proj' names no linear layer of the model");
}

TEST_CASE("an adapter drops its input with the forward's keyed masks, and none without a key", "[lora]") {
  xtrain::testing::SmallLlama shape;
  const auto config = shape.config();
  auto dropping = xtrain::model::declare_model(config);
  auto plain = xtrain::model::declare_model(config);
  xtrain::model::add_lora_adapters(*dropping, LoraConfig{4, 8.0, 0.5, {"q_proj", "down_proj"}},
                                   dropping->adapter_dropout_key());
  xtrain::model::add_lora_adapters(*plain, LoraConfig{4, 8.0, 0.0, {"q_proj", "down_proj"}},
                                   plain->adapter_dropout_key());
  // Every weight drawn by name (B too, so that the adapters add something): the same in both.
  xtrain::model::materialize(*dropping, seeded);
  xtrain::model::materialize(*plain, seeded);
  xtrain::model::Batch batch;
  batch.input_ids = torch::randint(shape.vocab, {2, 8});
  torch::NoGradGuard no_grad;
  const auto undropped = plain->logits(batch);
  CHECK(torch::equal(dropping->logits(batch), undropped));  // eval and generate: no key
  batch.dropout = {3, 7, torch::arange(16, torch::kLong).view({2, 8})};
  const auto dropped = dropping->logits(batch);
  CHECK_FALSE(torch::allclose(dropped, undropped, 1e-4, 1e-4));
  CHECK(torch::equal(dropping->logits(batch), dropped));  // a recompute draws the same masks
  CHECK(torch::equal(plain->logits(batch), undropped));   // p 0: nothing to drop
  batch.dropout.step = 8;
  CHECK_FALSE(torch::equal(dropping->logits(batch), dropped));
}

// A LoRA checkpoint's export (ckpt/lora_export.h): merged weights compute what the adapted layer
// did; PEFT's names and adapter_config.json.
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "ckpt/lora_export.h"
#include "model/layers/linear.h"
#include "model/layers/parameter_source.h"

namespace {
const xtrain::model::LoraConfig kLora{3, 6.0, 0.0, {"q_proj", "v_proj"}};
}

TEST_CASE("merging folds scale B A into the weight and removes the adapters", "[lora_export]") {
  xtrain::model::Linear linear(6, 5, /*bias=*/false);
  linear->add_adapter(kLora.rank, kLora.scale());
  torch::manual_seed(3);
  const auto values = torch::randn({1000});
  xtrain::model::materialize(*linear, [&](const std::string&, int64_t begin, int64_t count) {
    return values.narrow(0, begin, count);
  });
  const std::string layer = "model.layers.0.self_attn.q_proj";
  xtrain::ckpt::TensorMap tensors = {{layer + ".weight", linear->weight.detach().clone()},
                                     {layer + ".lora_A.weight", linear->lora_A->weight.detach().clone()},
                                     {layer + ".lora_B.weight", linear->lora_B->weight.detach().clone()},
                                     {"model.norm.weight", torch::ones({5})}};
  CHECK(xtrain::ckpt::merge_lora(tensors, kLora) == 1);
  CHECK(tensors.size() == 2);
  const auto x = torch::randn({4, 6});
  torch::NoGradGuard no_grad;
  CHECK(torch::allclose(torch::matmul(x, tensors.at(layer + ".weight").t()), linear(x), 1e-5, 1e-6));
}

TEST_CASE("the adapters under PEFT's names, and PEFT's adapter_config.json", "[lora_export]") {
  const xtrain::ckpt::TensorMap tensors = {{"model.layers.0.self_attn.q_proj.lora_A.weight", torch::zeros({3, 6})},
                                           {"model.layers.0.self_attn.q_proj.weight", torch::zeros({6, 6})}};
  const auto adapters = xtrain::ckpt::peft_adapter_tensors(tensors, xtrain::model::model_spec("llama"));
  REQUIRE(adapters.size() == 1);
  CHECK(adapters.begin()->first == "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  const auto config = xtrain::ckpt::peft_adapter_config(kLora, "base/folder");
  CHECK(config.at("peft_type") == "LORA");
  CHECK(config.at("task_type") == "CAUSAL_LM");
  CHECK(config.at("r") == 3);
  CHECK(config.at("lora_alpha").is_number_integer());
  CHECK(config.at("lora_alpha") == 6);
  CHECK(config.at("lora_dropout") == 0.0);
  CHECK(config.at("target_modules").get<std::vector<std::string>>() == kLora.targets);
  CHECK(config.at("base_model_name_or_path") == "base/folder");
}

TEST_CASE("a checkpoint's config.json carries the adapters' settings both ways", "[lora_export]") {
  nlohmann::json config = {{"model_type", "llama"}};
  CHECK_FALSE(xtrain::model::lora_from_config(config, "c.json"));
  config[xtrain::model::kLoraConfigKey] = xtrain::model::lora_to_json(kLora);
  const auto back = xtrain::model::lora_from_config(config, "c.json");
  REQUIRE(back);
  CHECK(back->rank == 3);
  CHECK(back->alpha == 6.0);
  CHECK(back->targets == kLora.targets);
  config[xtrain::model::kLoraConfigKey]["r"] = 0;
  CHECK_THROWS_WITH(xtrain::model::lora_from_config(config, "c.json"),
                    Catch::Contains("c.json: \"xtrain_lora\" needs r >= 1"));
}

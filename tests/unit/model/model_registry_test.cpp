// The model registry: every family is found by model.family and by its Hugging Face config, and
// a config of a family xtrain does not train is an error naming the file and the families.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "ckpt/hf_config.h"
#include "model/causal_lm.h"
#include "model/model_spec.h"
#include "model/small_llama.h"
#include "util/input_error.h"

using namespace xtrain;

TEST_CASE("every registered family round-trips through its Hugging Face config", "[model][registry]") {
  CHECK(model::model_families() ==
        std::vector<std::string>{"llama", "qwen2", "qwen3", "qwen3_moe", "mixtral", "bert", "llava"});
  for (const auto& spec : model::model_specs()) {
    INFO(spec.family);
    // The encoder and the vision-language model have shapes of their own, and their own round
    // trips (bert_golden_test.cpp, llava_golden_test.cpp).
    if (spec.family == "bert" || spec.family == "llava") continue;
    testing::SmallLlama shape;
    shape.family = spec.family;
    shape.head_dim = spec.family == "qwen3" ? 4 : 0;
    if (spec.experts) shape.with_experts(24);
    if (spec.family == "mixtral") shape.first_k_dense = 0;
    const auto config = shape.config();
    const auto json = ckpt::hf_config(config, 3);
    CHECK(json.at("architectures").at(0) == spec.hf_architecture);
    CHECK(&model::model_spec_for_hf(json, "config.json") == &spec);
    const auto back = ckpt::model_config_from_hf(json, "config.json");
    CHECK(back.family == spec.family);
    CHECK(back.head_dim() == config.head_dim());
    CHECK(back.num_kv_heads == config.num_kv_heads);
    CHECK(back.num_experts == config.num_experts);
    CHECK(back.num_experts_per_tok == config.num_experts_per_tok);
    CHECK(back.moe_intermediate_size == config.moe_intermediate_size);
    CHECK(back.first_k_dense == config.first_k_dense);
    const auto model = spec.build(config);
    CHECK(model->config().family == spec.family);
    for (const auto& item : model->named_parameters()) CHECK(spec.from_hf_name(spec.to_hf_name(item.key())) == item.key());
    CHECK(spec.decays("model.layers.0.mlp.up_proj.weight", 2));
    CHECK_FALSE(spec.decays("model.norm.weight", 1));
  }
}

TEST_CASE("a Hugging Face config of another family is an input error naming the file", "[model][registry]") {
  const nlohmann::json gpt2 = {{"model_type", "gpt2"}, {"architectures", {"GPT2LMHeadModel"}}};
  CHECK_THROWS_WITH(model::model_spec_for_hf(gpt2, "dir/config.json"),
                    "dir/config.json: model_type \"gpt2\" (GPT2LMHeadModel) is not a family xtrain trains: llama "
                    "(LlamaForCausalLM), qwen2 (Qwen2ForCausalLM), qwen3 (Qwen3ForCausalLM), qwen3_moe "
                    "(Qwen3MoeForCausalLM), mixtral (MixtralForCausalLM), bert (BertForMaskedLM), llava "
                    "(LlavaForConditionalGeneration)");
  CHECK_THROWS_AS(ckpt::model_config_from_hf(nlohmann::json::array(), "dir/config.json"), InputError);
  // Found by the class alone when model_type is absent.
  CHECK(model::model_spec_for_hf({{"architectures", {"Qwen2ForCausalLM"}}}, "c").family == "qwen2");
}

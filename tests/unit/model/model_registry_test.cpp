// The model registry: every family is found by model.family and by its Hugging Face config, a
// config of a family xtrain does not train is an error naming the file and the families, and each
// family's parameters have Hugging Face tensor names that map both ways.
#include <torch/torch.h>

#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "model/spec/hf_config.h"
#include "model/causal_lm.h"
#include "model/model_builder.h"
#include "model/spec/model_spec.h"
#include "model/small_llama.h"
#include "util/input_error.h"

using namespace xtrain;
using Stored = std::vector<std::pair<std::string, std::vector<int64_t>>>;

namespace {

// A small model of each family: the decoders' shape, bert's, and llava's (a CLIP tower of 2
// layers in front of a llama).
model::ModelConfig small_config(const model::ModelSpec& spec) {
  testing::SmallLlama shape;
  const bool own_shape = spec.family == "bert" || spec.family == "llava" || spec.family == "vit" || spec.family == "t5" ||
                         spec.family == "clip";
  shape.family = own_shape ? "llama" : spec.family;
  if (spec.capabilities.experts) shape.with_experts(24);
  if (spec.family == "mixtral") shape.first_k_dense = 0;
  auto c = shape.config();
  c.family = spec.family;
  if (spec.family == "bert" || spec.family == "vit" || spec.family == "t5" || spec.family == "clip")
    c.num_kv_heads = c.num_heads;
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
  if (spec.family == "vit") {
    c.tie_embeddings = false;
    c.vision.image_size = 12;
    c.vision.patch_size = 4;
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

std::set<std::string> parameter_names(const model::ModelSpec& spec) {
  std::set<std::string> names;
  for (const auto& item : model::declare_model(small_config(spec))->named_parameters()) names.insert(item.key());
  return names;
}

}  // namespace

TEST_CASE("every registered family round-trips through its Hugging Face config", "[model][registry]") {
  CHECK(model::model_families() ==
        std::vector<std::string>{"llama", "qwen2", "qwen3", "qwen3_moe", "mixtral", "deepseek_v3", "gpt_oss", "bert",
                                 "llava", "vit", "t5", "clip"});
  for (const auto& spec : model::model_specs()) {
    INFO(spec.family);
    // The encoder, the vision-language model, the image classifier and the encoder-decoder have
    // shapes of their own, and their own round trips
    // (bert_golden_test.cpp, llava_golden_test.cpp, vit_golden_test.cpp, t5_golden_test.cpp,
    // clip_golden_test.cpp).
    if (spec.family == "bert" || spec.family == "llava" || spec.family == "vit" || spec.family == "t5" ||
        spec.family == "clip")
      continue;
    testing::SmallLlama shape;
    shape.family = spec.family;
    shape.head_dim = spec.family == "qwen3" ? 4 : 0;
    if (spec.capabilities.experts) shape.with_experts(24);
    if (spec.family == "mixtral" || spec.family == "gpt_oss") shape.first_k_dense = 0;
    const bool latent = spec.family == "deepseek_v3";
    if (latent) shape.kv_heads = shape.heads;  // every latent head has its key and value
    auto config = shape.config();
    if (latent) {
      config.latent = {16, 24, 8, 4, 6, false};
      config.router = model::Router::sigmoid_bias;
      config.num_shared_experts = 2;
      config.rope_scaling.type = model::RopeScalingType::yarn;
      config.rope_scaling.factor = 4;
      config.rope_scaling.mscale_all_dim = 0.5;
    }
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
    CHECK(back.num_shared_experts == config.num_shared_experts);
    CHECK(back.router == config.router);
    CHECK(back.rope_scaling.type == config.rope_scaling.type);
    CHECK(back.rope_scaling.factor == config.rope_scaling.factor);
    CHECK(back.rope_scaling.softmax_scale(24) == config.rope_scaling.softmax_scale(24));
    CHECK(back.latent.q_lora_rank == config.latent.q_lora_rank);
    CHECK(back.latent.kv_lora_rank == config.latent.kv_lora_rank);
    CHECK(back.latent.qk_rope_head_dim == config.latent.qk_rope_head_dim);
    CHECK(back.latent.v_head_dim == config.latent.v_head_dim);
    CHECK(back.latent.rope_interleave == config.latent.rope_interleave);
    const auto model = model::declare_model(config);
    CHECK(model->config().family == spec.family);
    CHECK(spec.decays("model.layers.0.mlp.up_proj.weight", 2));
    CHECK_FALSE(spec.decays("model.norm.weight", 1));
  }
}

TEST_CASE("a Hugging Face config of another family is an input error naming the file", "[model][registry]") {
  const nlohmann::json gpt2 = {{"model_type", "gpt2"}, {"architectures", {"GPT2LMHeadModel"}}};
  CHECK_THROWS_WITH(model::model_spec_for_hf(gpt2, "dir/config.json"),
                    "dir/config.json: model_type \"gpt2\" (GPT2LMHeadModel) is not a family xtrain trains: llama "
                    "(LlamaForCausalLM), qwen2 (Qwen2ForCausalLM), qwen3 (Qwen3ForCausalLM), qwen3_moe "
                    "(Qwen3MoeForCausalLM), mixtral (MixtralForCausalLM), deepseek_v3 (DeepseekV3ForCausalLM), gpt_oss "
                    "(GptOssForCausalLM), bert (BertForMaskedLM), llava "
                    "(LlavaForConditionalGeneration), vit (ViTForImageClassification), t5 "
                    "(T5ForConditionalGeneration), clip (CLIPModel)");
  CHECK_THROWS_AS(ckpt::model_config_from_hf(nlohmann::json::array(), "dir/config.json"), InputError);
  // Found by the class alone when model_type is absent.
  CHECK(model::model_spec_for_hf({{"architectures", {"Qwen2ForCausalLM"}}}, "c").family == "qwen2");
}

TEST_CASE("every parameter of every family is stored under Hugging Face names that read back to it",
          "[model][registry]") {
  for (const auto& spec : model::model_specs()) {
    INFO(spec.family);
    const auto model = model::declare_model(small_config(spec));
    std::set<std::string> stored_names;
    size_t stored_count = 0;
    for (const auto& item : model->named_parameters()) {
      const std::string& name = item.key();
      INFO(name);
      const auto stored = model::hf_stored_tensors(spec, name, item.value().sizes().vec());
      REQUIRE_FALSE(stored.empty());
      // A parameter stored whole is found again by its name; the importer looks experts' parts up
      // by the names hf_parts gives.
      if (stored.size() == 1) CHECK(spec.from_hf_name(stored[0].first) == name);
      for (const auto& [hf_name, shape] : stored) stored_names.insert(hf_name), ++stored_count;
    }
    // No two tensors share a name in the folder.
    CHECK(stored_names.size() == stored_count);
  }
}

TEST_CASE("each family's Hugging Face tensor names, both ways, by example", "[model][registry]") {
  // The names the tests below expect are the model's own.
  for (const auto* family : {"llama", "qwen2", "qwen3", "qwen3_moe", "mixtral"}) {
    INFO(family);
    const auto& spec = model::model_spec(family);
    const auto names = parameter_names(spec);
    for (const auto* name : {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                             "model.layers.0.input_layernorm.weight", "model.norm.weight", "lm_head.weight"}) {
      CHECK(names.count(name) == 1);
      CHECK(spec.to_hf_name(name) == name);
      CHECK(spec.from_hf_name(name) == name);
    }
  }

  SECTION("qwen3_moe: the router under mlp.gate, each expert's projections apart under mlp.experts.N") {
    const auto& spec = model::model_spec("qwen3_moe");
    const auto names = parameter_names(spec);
    REQUIRE(names.count("model.layers.1.mlp.gate.weight") == 1);
    CHECK(spec.to_hf_name("model.layers.1.mlp.gate.weight") == "model.layers.1.mlp.gate.weight");
    REQUIRE(names.count("model.layers.1.mlp.experts.gate_up_proj") == 1);
    // [experts, 2 x width, hidden] and [experts, hidden, width]: 2 experts of width 6, hidden 4.
    CHECK(model::hf_stored_tensors(spec, "model.layers.1.mlp.experts.gate_up_proj", {2, 12, 4}) ==
          Stored{{"model.layers.1.mlp.experts.0.gate_proj.weight", {6, 4}},
                 {"model.layers.1.mlp.experts.0.up_proj.weight", {6, 4}},
                 {"model.layers.1.mlp.experts.1.gate_proj.weight", {6, 4}},
                 {"model.layers.1.mlp.experts.1.up_proj.weight", {6, 4}}});
    CHECK(model::hf_stored_tensors(spec, "model.layers.1.mlp.experts.down_proj", {2, 4, 6}) ==
          Stored{{"model.layers.1.mlp.experts.0.down_proj.weight", {4, 6}},
                 {"model.layers.1.mlp.experts.1.down_proj.weight", {4, 6}}});
  }

  SECTION("mixtral: the router and the experts under block_sparse_moe, as w1, w3 and w2") {
    const auto& spec = model::model_spec("mixtral");
    const auto names = parameter_names(spec);
    REQUIRE(names.count("model.layers.0.mlp.gate.weight") == 1);
    CHECK(spec.to_hf_name("model.layers.0.mlp.gate.weight") == "model.layers.0.block_sparse_moe.gate.weight");
    CHECK(spec.from_hf_name("model.layers.0.block_sparse_moe.gate.weight") == "model.layers.0.mlp.gate.weight");
    CHECK(model::hf_stored_tensors(spec, "model.layers.0.mlp.gate.weight", {4, 32}) ==
          Stored{{"model.layers.0.block_sparse_moe.gate.weight", {4, 32}}});
    REQUIRE(names.count("model.layers.0.mlp.experts.gate_up_proj") == 1);
    CHECK(model::hf_stored_tensors(spec, "model.layers.0.mlp.experts.gate_up_proj", {2, 12, 4}) ==
          Stored{{"model.layers.0.block_sparse_moe.experts.0.w1.weight", {6, 4}},
                 {"model.layers.0.block_sparse_moe.experts.0.w3.weight", {6, 4}},
                 {"model.layers.0.block_sparse_moe.experts.1.w1.weight", {6, 4}},
                 {"model.layers.0.block_sparse_moe.experts.1.w3.weight", {6, 4}}});
    CHECK(model::hf_stored_tensors(spec, "model.layers.0.mlp.experts.down_proj", {2, 4, 6}) ==
          Stored{{"model.layers.0.block_sparse_moe.experts.0.w2.weight", {4, 6}},
                 {"model.layers.0.block_sparse_moe.experts.1.w2.weight", {4, 6}}});
  }

  SECTION("bert: BertForMaskedLM's names, unchanged") {
    const auto& spec = model::model_spec("bert");
    const auto names = parameter_names(spec);
    for (const auto* name : {"bert.embeddings.word_embeddings.weight", "bert.embeddings.LayerNorm.weight",
                             "bert.encoder.layer.0.attention.self.query.weight",
                             "bert.encoder.layer.1.output.LayerNorm.bias", "cls.predictions.transform.dense.weight",
                             "cls.predictions.bias"}) {
      INFO(name);
      CHECK(names.count(name) == 1);
      CHECK(spec.to_hf_name(name) == name);
      CHECK(spec.from_hf_name(name) == name);
    }
  }

  SECTION("llava: save_pretrained's names are stored; transformers' module names and older ones read back") {
    const auto& spec = model::model_spec("llava");
    const auto names = parameter_names(spec);
    // HF name read -> xtrain's (and stored) name.
    const std::vector<std::pair<std::string, std::string>> reads = {
        {"vision_tower.vision_model.encoder.layers.0.mlp.fc1.weight", "vision_tower.encoder.layers.0.mlp.fc1.weight"},
        {"model.vision_tower.embeddings.patch_embedding.weight", "vision_tower.embeddings.patch_embedding.weight"},
        {"model.multi_modal_projector.linear_1.weight", "multi_modal_projector.linear_1.weight"},
        {"model.language_model.layers.0.self_attn.q_proj.weight",
         "language_model.model.layers.0.self_attn.q_proj.weight"},
        {"model.language_model.norm.weight", "language_model.model.norm.weight"},
        {"lm_head.weight", "language_model.lm_head.weight"},
        // Names already in the stored form stay as they are.
        {"vision_tower.encoder.layers.1.self_attn.out_proj.bias",
         "vision_tower.encoder.layers.1.self_attn.out_proj.bias"},
        {"multi_modal_projector.linear_2.bias", "multi_modal_projector.linear_2.bias"},
        {"language_model.model.embed_tokens.weight", "language_model.model.embed_tokens.weight"},
        {"language_model.lm_head.weight", "language_model.lm_head.weight"}};
    for (const auto& [hf, xtrain_name] : reads) {
      INFO(hf);
      CHECK(names.count(xtrain_name) == 1);
      CHECK(spec.from_hf_name(hf) == xtrain_name);
      // Written back under save_pretrained's name, which is xtrain's.
      CHECK(spec.to_hf_name(xtrain_name) == xtrain_name);
    }
  }
}

TEST_CASE("each family declares what its models support", "[model][registry]") {
  for (const char* dense : {"llama", "qwen2", "qwen3"}) {
    const auto& can = model::model_spec(dense).capabilities;
    INFO(dense);
    CHECK((can.tensor_parallel && can.pipeline && can.causal));
    CHECK_FALSE((can.experts || can.images || can.pad_token));
  }
  for (const char* moe : {"qwen3_moe", "mixtral", "deepseek_v3"}) {
    const auto& can = model::model_spec(moe).capabilities;
    INFO(moe);
    CHECK((can.experts && can.causal && can.tensor_parallel && can.pipeline));
  }
  const auto& bert = model::model_spec("bert").capabilities;
  CHECK((bert.pipeline && bert.tensor_parallel));
  CHECK_FALSE((bert.causal || bert.experts));
  CHECK(bert.pad_token);
  const auto& llava = model::model_spec("llava").capabilities;
  CHECK((llava.images && llava.causal));
  CHECK_FALSE((llava.tensor_parallel || llava.pipeline || llava.experts));
}

TEST_CASE("a model of a family without tensor or pipeline parallelism refuses them as a logic error",
          "[model][registry]") {
  const auto model = model::declare_model(small_config(model::model_spec("llava")));
  try {
    model->tensor_parallel_plan(0, 2);
    FAIL("no error");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("llava model, whose ModelSpec lacks capabilities.tensor_parallel") !=
          std::string::npos);
  }
  try {
    model->forward_chunk({}, {}, 0, 1, true, true);
    FAIL("no error");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("llava model, whose ModelSpec lacks capabilities.pipeline") != std::string::npos);
  }
  CHECK(model::declare_model(small_config(model::model_spec("bert")))->moe_blocks().empty());
}

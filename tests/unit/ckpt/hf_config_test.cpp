// The Hugging Face round trip keeps what it read: config.json of every family, imported as
// transformers 5 writes it and written back with xtrain's fields over it, keeps the fields xtrain
// does not compute (token ids, dropout, unknown fields) and the router's coefficient digit for
// digit; the fields xtrain computes are xtrain's; dropout is found wherever a family keeps it.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "model/spec/hf_config.h"
#include "model/spec/llama_family.h"

using namespace xtrain;
using nlohmann::json;

namespace hf_config_test {

// The fields of a small decoder of `family` in transformers 5's spellings (rope_parameters,
// dtype), with token ids and fields xtrain does not know.
json decoder(const std::string& family) {
  json c = {{"architectures", {family == "llama" ? "LlamaForCausalLM" : "Qwen3ForCausalLM"}},
            {"model_type", family},
            {"vocab_size", 64},
            {"hidden_size", 32},
            {"intermediate_size", 48},
            {"num_hidden_layers", 2},
            {"num_attention_heads", 4},
            {"num_key_value_heads", 2},
            {"max_position_embeddings", 128},
            {"rms_norm_eps", 1e-6},
            {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 1000000.0}}},
            {"tie_word_embeddings", false},
            {"hidden_act", "silu"},
            {"attention_dropout", 0.0},
            {"initializer_range", 0.0123},
            {"bos_token_id", 11},
            {"eos_token_id", 12},
            {"pad_token_id", 13},
            {"use_cache", false},
            {"dtype", "bfloat16"},
            {"transformers_version", "5.24.0"},
            {"some_field_xtrain_does_not_know", {{"kept", true}}}};
  if (family == "qwen2") c["architectures"] = {"Qwen2ForCausalLM"};
  if (family == "qwen3" || family == "qwen3_moe") c["head_dim"] = 16;
  if (family == "qwen3_moe") {  // the second layer of 6 experts, 3 per token
    c["architectures"] = {"Qwen3MoeForCausalLM"};
    c.update({{"num_local_experts", 6},
              {"num_experts_per_tok", 3},
              {"moe_intermediate_size", 24},
              {"mlp_only_layers", {0}},
              {"decoder_sparse_step", 1},
              {"norm_topk_prob", true},
              {"router_aux_loss_coef", 0.003},  // x 3 / 3 is 0.0030000000000000005 in doubles
              {"output_router_logits", true},
              {"sliding_window", nullptr}});
  }
  if (family == "mixtral") {
    c["architectures"] = {"MixtralForCausalLM"};
    c.update({{"num_local_experts", 4},
              {"num_experts_per_tok", 2},
              {"router_aux_loss_coef", 0.02},
              {"router_jitter_noise", 0.0},
              {"output_router_logits", false},
              {"sliding_window", nullptr}});
  }
  return c;
}

json bert() {
  return {{"architectures", {"BertForMaskedLM"}},
          {"model_type", "bert"},
          {"vocab_size", 64},
          {"hidden_size", 32},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"intermediate_size", 48},
          {"hidden_act", "gelu"},
          {"hidden_dropout_prob", 0.1},
          {"attention_probs_dropout_prob", 0.1},
          {"classifier_dropout", nullptr},
          {"max_position_embeddings", 64},
          {"type_vocab_size", 2},
          {"initializer_range", 0.02},
          {"layer_norm_eps", 1e-12},
          {"pad_token_id", 1},
          {"bos_token_id", nullptr},
          {"eos_token_id", nullptr},
          {"tie_word_embeddings", true},
          {"dtype", "float32"},
          {"transformers_version", "5.24.0"}};
}

json llava() {
  json text = decoder("llama");
  for (const char* field : {"architectures", "dtype", "transformers_version", "some_field_xtrain_does_not_know"})
    text.erase(field);
  return {{"architectures", {"LlavaForConditionalGeneration"}},
          {"model_type", "llava"},
          {"text_config", text},
          {"vision_config",
           {{"model_type", "clip_vision_model"},
            {"hidden_size", 24},
            {"intermediate_size", 48},
            {"num_hidden_layers", 2},
            {"num_attention_heads", 4},
            {"image_size", 30},
            {"patch_size", 10},
            {"hidden_act", "quick_gelu"},
            {"attention_dropout", 0.1},
            {"dropout", 0.0}}},
          {"image_token_id", 63},
          {"image_seq_length", 9},
          {"vision_feature_layer", -2},
          {"vision_feature_select_strategy", "default"},
          {"pad_token_id", 62},
          {"tie_word_embeddings", false},
          {"dtype", "bfloat16"},
          {"transformers_version", "5.24.0"}};
}

json imported(const std::string& family) {
  return family == "bert" ? bert() : family == "llava" ? llava() : decoder(family);
}

// Spellings of fields xtrain writes in another form (rope_theta and rope_scaling, torch_dtype,
// num_experts, image_token_index): the only imported fields an export does not carry.
const std::set<std::string> kRespelled = {"rope_parameters", "dtype", "num_local_experts", "image_token_id"};

// Every field of `from` is in `to` with the same value, but those xtrain respells.
void check_kept(const json& from, const json& to, const std::string& family, const std::string& where) {
  for (const auto& [key, value] : from.items()) {
    INFO(where << key);
    if (key == "text_config" || key == "vision_config") {
      check_kept(value, to.at(key), family, key + ".");
    } else if (kRespelled.count(key) && !(family == "mixtral" && key == "num_local_experts")) {
      CHECK_FALSE(to.contains(key));
    } else {
      REQUIRE(to.contains(key));
      CHECK(to.at(key) == value);
    }
  }
}

}  // namespace hf_config_test

using namespace hf_config_test;

TEST_CASE("each family's config.json comes back with what xtrain does not compute as it was", "[ckpt][hf_config]") {
  const std::string family = GENERATE("llama", "qwen2", "qwen3", "qwen3_moe", "mixtral", "bert", "llava");
  INFO("family = " << family);
  const json from = imported(family);
  const auto config = ckpt::model_config_from_hf(from, "config.json");
  const json back = ckpt::hf_config(config, /*eos_token_id=*/40, from);
  check_kept(from, back, family, "");
  // xtrain's fields in xtrain's spellings, which read back to the same model.
  const auto reread = ckpt::model_config_from_hf(back, "config.json");
  CHECK(ckpt::hf_config(reread, 40) == ckpt::hf_config(config, 40));
  CHECK(back.at("torch_dtype") == "float32");  // the weights an export writes
  if (family != "bert" && family != "llava") {
    CHECK(back.at("rope_theta") == 1000000.0);
    // Without an imported config, the token ids are the tokenizer's EOS: the imported ones stand.
    CHECK(ckpt::hf_config(config, 40).at("bos_token_id") == 40);
    CHECK(back.at("bos_token_id") == 11);
    CHECK(back.at("eos_token_id") == 12);
    CHECK(back.at("pad_token_id") == 13);
  }
  if (family == "qwen3_moe") CHECK(back.at("num_experts") == 6);
  if (family == "llava") {
    CHECK(back.at("image_token_index") == 63);
    CHECK(back.at("text_config").at("pad_token_id") == 13);
  }
  // A checkpoint carries the merged config on: written again, it is the same.
  CHECK(ckpt::hf_config(reread, 40, back) == back);
}

TEST_CASE("an unset token id in the imported config is filled with xtrain's, a set one stands", "[ckpt][hf_config]") {
  json from = decoder("qwen3");
  from["bos_token_id"] = nullptr;
  from.erase("eos_token_id");
  const auto back = ckpt::hf_config(ckpt::model_config_from_hf(from, "config.json"), 40, from);
  CHECK(back.at("bos_token_id") == 40);
  CHECK(back.at("eos_token_id") == 40);
  CHECK(back.at("pad_token_id") == 13);
  CHECK(ckpt::hf_generation_config(back) ==
        json{{"_from_model_config", true}, {"bos_token_id", 40}, {"eos_token_id", 40}});
  CHECK(ckpt::hf_generation_config(decoder("qwen3")) ==
        json{{"_from_model_config", true}, {"bos_token_id", 11}, {"eos_token_id", 12}});
  CHECK(ckpt::hf_generation_config(bert()).is_null());  // no EOS, no generation config
}

TEST_CASE("router_aux_loss_coef comes back digit for digit unless the recipe changed it", "[ckpt][hf_config]") {
  const json from = decoder("qwen3_moe");
  auto config = ckpt::model_config_from_hf(from, "config.json");
  // xtrain's coefficient is transformers' times top k (transformers' loss is k times xtrain's).
  CHECK(config.router_aux_loss_coef == model::router_aux_loss_coef_from_hf(0.003, 3));
  CHECK(ckpt::hf_config(config, 40, from).at("router_aux_loss_coef").dump() == "0.003");
  // Computed without the imported number, the division rounds: that is why it is kept.
  CHECK(ckpt::hf_config(config, 40).at("router_aux_loss_coef").dump() == "0.0030000000000000005");
  config.router_aux_loss_coef = 0.06;  // a recipe's own coefficient is written in transformers' terms
  CHECK(ckpt::hf_config(config, 40, from).at("router_aux_loss_coef").get<double>() == 0.02);
  // A config without the field reads as transformers' default, 0.001.
  json bare = from;
  bare.erase("router_aux_loss_coef");
  CHECK(ckpt::model_config_from_hf(bare, "config.json").router_aux_loss_coef == 0.001 * 3);
  bare["router_aux_loss_coef"] = "0.1";
  CHECK_THROWS_WITH(ckpt::model_config_from_hf(bare, "dir/config.json"),
                    "dir/config.json: field \"router_aux_loss_coef\" must be a number");
}

TEST_CASE("xtrain's note of unexported options is rewritten from the run, not carried", "[ckpt][hf_config]") {
  json from = decoder("qwen3_moe");
  from["xtrain_unexported"] = {"model.capacity_factor (transformers is dropless)"};
  const auto back = ckpt::hf_config(ckpt::model_config_from_hf(from, "config.json"), 40, from);
  CHECK_FALSE(back.contains("xtrain_unexported"));
}

TEST_CASE("dropout is found in every family's config.json, and the export keeps it", "[ckpt][hf_config]") {
  CHECK(ckpt::hf_dropout(decoder("llama")).empty());
  const auto bert_dropout = ckpt::hf_dropout(bert());
  CHECK(ckpt::describe(bert_dropout) == "hidden_dropout_prob 0.1, attention_probs_dropout_prob 0.1");
  CHECK(ckpt::describe(ckpt::hf_dropout(llava())) == "vision_config.attention_dropout 0.1");
  json llama = decoder("llama");
  llama["attention_dropout"] = 0.25;
  CHECK(ckpt::describe(ckpt::hf_dropout(llama)) == "attention_dropout 0.25");
  json mixtral = decoder("mixtral");
  mixtral["router_jitter_noise"] = 0.01;
  CHECK(ckpt::describe(ckpt::hf_dropout(mixtral)) == "router_jitter_noise 0.01");

  // Without an import, xtrain writes what it computed: no dropout.
  const auto config = ckpt::model_config_from_hf(bert(), "config.json");
  CHECK(ckpt::hf_config(config, 40).at("hidden_dropout_prob") == 0.0);
  CHECK(ckpt::hf_config(config, 40, bert()).at("hidden_dropout_prob") == 0.1);
  CHECK(ckpt::hf_config(config, 40, bert()).at("pad_token_id") == 1);
}

#include "model/spec/gpt_oss_family.h"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/spec/hf_fields.h"
#include "model/spec/llama_family.h"
#include "util/input_error.h"

namespace xtrain::model {
namespace {

nlohmann::json gpt_oss_hf_config(const ModelSpec& spec, const ModelConfig& c, int64_t eos_token_id) {
  nlohmann::json rope = {{"rope_type", "default"}, {"rope_theta", c.rope_theta}};
  if (c.rope_scaling.enabled()) {
    rope = hf_rope_scaling(c.rope_scaling);
    rope["rope_theta"] = c.rope_theta;
  }
  std::vector<std::string> layer_types = c.layer_types;
  if (layer_types.empty()) layer_types.assign(static_cast<size_t>(c.num_layers), "full_attention");
  return {
      {"architectures", {spec.hf_architecture}},
      {"model_type", spec.hf_model_type},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.moe_intermediate_size},
      {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_heads},
      {"num_key_value_heads", c.num_kv_heads},
      {"head_dim", c.head_dim()},
      {"num_local_experts", c.num_experts},
      {"num_experts_per_tok", c.num_experts_per_tok},
      {"router_aux_loss_coef", c.router_aux_loss_coef / static_cast<double>(c.num_experts_per_tok)},
      {"output_router_logits", false},
      {"sliding_window", c.sliding_window > 0 ? nlohmann::json(c.sliding_window) : nlohmann::json(nullptr)},
      {"layer_types", layer_types},
      {"swiglu_limit", c.swiglu_limit},
      {"swiglu_alpha", c.swiglu_alpha},
      {"rope_parameters", rope},
      {"max_position_embeddings", c.max_seq_len},
      {"rms_norm_eps", c.norm_eps},
      {"tie_word_embeddings", c.tie_embeddings},
      {"hidden_act", "silu"},
      {"attention_bias", true},
      {"attention_dropout", 0.0},
      {"initializer_range", c.init_std},
      {"bos_token_id", eos_token_id},
      {"eos_token_id", eos_token_id},
      {"torch_dtype", "float32"},
      {"use_cache", true},
  };
}

// transformers' GptOssConfig defaults stand where config.json leaves a field out.
ModelConfig gpt_oss_config_from_hf(const ModelSpec& spec, const nlohmann::json& json, const std::string& source) {
  const HfFields f(json, source);
  ModelConfig c;
  c.family = spec.family;
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("hidden_size");
  c.num_layers = f.integer("num_hidden_layers");
  c.num_heads = f.integer("num_attention_heads");
  c.num_kv_heads = f.integer("num_key_value_heads", c.num_heads);
  c.head_dim_override = f.integer("head_dim", 64);
  if (c.num_heads <= 0 || c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0)
    throw InputError(fmt::format("{}: inconsistent head counts (heads {}, kv heads {})", source, c.num_heads,
                                 c.num_kv_heads));
  if (c.hidden_size % c.num_heads == 0 && c.head_dim_override == c.hidden_size / c.num_heads) c.head_dim_override = 0;
  c.max_seq_len = f.integer("max_position_embeddings", 131072);
  read_hf_rope(json, source, c);
  c.norm_eps = f.number("rms_norm_eps", 1e-5);
  c.init_std = f.number("initializer_range", 0.02);
  c.tie_embeddings = f.boolean("tie_word_embeddings", false);
  c.num_experts = f.integer("num_local_experts", 128);
  c.num_experts_per_tok = f.integer("num_experts_per_tok", 4);
  c.moe_intermediate_size = c.intermediate_size = f.integer("intermediate_size", 2880);
  c.swiglu_limit = f.number("swiglu_limit", 7.0);
  c.swiglu_alpha = f.number("swiglu_alpha", 1.702);
  c.sliding_window = f.integer("sliding_window", 0);
  if (json.contains("layer_types") && !json.at("layer_types").is_null()) {
    if (!json.at("layer_types").is_array())
      throw InputError(fmt::format("{}: field \"layer_types\" must be a list", source));
    for (const auto& type : json.at("layer_types")) {
      if (!type.is_string() || (type != "sliding_attention" && type != "full_attention"))
        throw InputError(fmt::format("{}: layer_types holds {}; xtrain's gpt_oss layers are sliding_attention or "
                                     "full_attention",
                                     source, type.dump()));
      c.layer_types.push_back(type.get<std::string>());
    }
  } else if (c.num_layers > kMaxHfListLayers) {
    // The recipe loader refuses the count (model.num_layers' range); a list of that many names
    // would take the memory first.
    throw InputError(fmt::format("{}: field \"num_hidden_layers\" is {}, beyond any model xtrain builds", source,
                                 c.num_layers));
  } else {  // transformers' default: sliding, full, sliding, ...
    for (int64_t i = 0; i < c.num_layers; ++i) c.layer_types.push_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
  }
  double coef = f.number("router_aux_loss_coef", 0.001);
  c.router_aux_loss_coef = router_aux_loss_coef_from_hf(coef, c.num_experts_per_tok);
  if (f.text("hidden_act", "silu") != "silu")
    throw InputError(fmt::format("{}: hidden_act \"{}\"; xtrain's gpt_oss experts are the clamped SwiGLU", source,
                                 f.text("hidden_act", "")));
  if (!f.boolean("attention_bias", true))
    throw InputError(fmt::format("{}: attention_bias is false; xtrain's gpt_oss has biases on its projections",
                                 source));
  return c;
}

std::vector<std::pair<std::string, std::string>> gpt_oss_problems(const ModelConfig& c) {
  std::vector<std::pair<std::string, std::string>> problems;
  if (c.num_experts < 1)
    problems.emplace_back("model.num_experts", "gpt_oss's every layer is a mixture of experts: set num_experts");
  if (c.first_k_dense != 0 || c.moe_layer_step != 1)
    problems.emplace_back(c.first_k_dense != 0 ? "model.first_k_dense" : "model.moe_layer_step",
                          "gpt_oss's layers are all mixtures of experts: leave first_k_dense at 0 and moe_layer_step "
                          "at 1");
  if (c.router != Router::softmax)
    problems.emplace_back("model.router", "gpt_oss weighs its experts by the softmax of the chosen logits: leave "
                                          "model.router softmax");
  if (c.num_shared_experts != 0 || c.shared_expert_gate)
    problems.emplace_back("model.num_shared_experts", "gpt_oss has no shared experts: leave it at 0");
  if (c.capacity_factor > 0)
    problems.emplace_back("model.capacity_factor", "transformers' GptOssExperts is dropless: leave it at 0");
  if (!c.layer_types.empty() && static_cast<int64_t>(c.layer_types.size()) != c.num_layers)
    problems.emplace_back("model.layer_types", fmt::format("{} entries for {} layers: give one per layer",
                                                            c.layer_types.size(), c.num_layers));
  bool sliding = false;
  for (const auto& type : c.layer_types) {
    if (type != "sliding_attention" && type != "full_attention")
      problems.emplace_back("model.layer_types",
                            fmt::format("'{}': each entry is sliding_attention or full_attention", type));
    sliding = sliding || type == "sliding_attention";
  }
  if (sliding && c.sliding_window < 1)
    problems.emplace_back("model.sliding_window", "layer_types has sliding_attention layers: set sliding_window "
                                                  "(128 in GPT-OSS)");
  return problems;
}

}  // namespace

ModelSpec gpt_oss_spec() {
  ModelSpec spec;
  spec.family = "gpt_oss";
  spec.hf_architecture = "GptOssForCausalLM";
  spec.hf_model_type = "gpt_oss";
  spec.description =
      "attention sinks, sliding-window and full layers (model.layer_types, sliding_window), biased projections, "
      "and in every layer a mixture of biased, clamped experts under a biased router (GPT-OSS)";
  spec.capabilities.experts = true;
  spec.capabilities.context_parallel = true;
  spec.capabilities.tensor_parallel = spec.capabilities.pipeline = true;
  spec.architecture = Architecture::llama_decoder;
  spec.attention.qkv_bias = spec.attention.o_bias = spec.attention.sinks = spec.attention.gpt_oss_experts = true;
  // Attention's biased projections (the sinks stay frozen); the experts are 3-D tensors.
  spec.lora_targets = [](const ModelConfig&) { return std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj"}; };
  const ModelSpec names = spec;
  spec.to_hf_config = [names](const ModelConfig& config, int64_t eos) { return gpt_oss_hf_config(names, config, eos); };
  spec.from_hf_config = [names](const nlohmann::json& json, const std::string& source) {
    return gpt_oss_config_from_hf(names, json, source);
  };
  spec.to_hf_name = spec.from_hf_name = [](const std::string& name) { return name; };
  spec.decays = [](const std::string& /*name*/, int64_t dims) { return dims >= 2; };
  spec.check = gpt_oss_problems;
  return spec;
}

}  // namespace xtrain::model

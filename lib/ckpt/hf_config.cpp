#include "ckpt/hf_config.h"

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>

#include "util/durable_file.h"
#include "util/input_error.h"

namespace xtrain::ckpt {

namespace {
// Each family's Hugging Face class and model_type.
struct HfFamily {
  const char* family;
  const char* architecture;
};
constexpr HfFamily kHfFamilies[] = {
    {"llama", "LlamaForCausalLM"}, {"qwen2", "Qwen2ForCausalLM"}, {"qwen3", "Qwen3ForCausalLM"}};

const char* hf_architecture(const std::string& family) {
  for (const auto& f : kHfFamilies)
    if (family == f.family) return f.architecture;
  throw std::invalid_argument("no Hugging Face class for model family " + family);
}

nlohmann::json rope_scaling_json(const model::RopeScaling& s) {
  if (!s.enabled()) return nullptr;
  return {{"rope_type", "llama3"},
          {"factor", s.factor},
          {"low_freq_factor", s.low_freq_factor},
          {"high_freq_factor", s.high_freq_factor},
          {"original_max_position_embeddings", s.original_max_len}};
}

// transformers 5 writes rope_parameters (rope_type, rope_theta and the scaling's fields); 4.x
// wrote rope_theta and rope_scaling. Rope types other than default and llama3 are refused.
void read_rope(const nlohmann::json& json, const std::string& source, model::LlamaConfig& c) {
  const nlohmann::json* rope = nullptr;
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (!rope && json.contains(key) && json.at(key).is_object()) rope = &json.at(key);
  auto number = [&](const nlohmann::json& object, const char* name, double fallback) {
    if (!object.contains(name)) return fallback;
    if (!object.at(name).is_number())
      throw InputError(fmt::format("{}: rope field \"{}\" must be a number", source, name));
    return object.at(name).get<double>();
  };
  c.rope_theta = number(json, "rope_theta", 10000.0);
  if (!rope) return;
  c.rope_theta = number(*rope, "rope_theta", c.rope_theta);
  const std::string type = rope->value("rope_type", rope->value("type", std::string("default")));
  if (type == "default") return;
  if (type != "llama3")
    throw InputError(fmt::format("{}: rope type \"{}\" ({}); xtrain computes the default rotary embedding and "
                                 "llama3's scaling (a model trained with another would compute other logits here)",
                                 source, type, rope->dump()));
  for (const char* name : {"factor", "original_max_position_embeddings"})
    if (!rope->contains(name)) throw InputError(fmt::format("{}: llama3 rope scaling without \"{}\"", source, name));
  c.rope_scaling.factor = number(*rope, "factor", 0);
  c.rope_scaling.low_freq_factor = number(*rope, "low_freq_factor", 1.0);
  c.rope_scaling.high_freq_factor = number(*rope, "high_freq_factor", 4.0);
  c.rope_scaling.original_max_len = static_cast<int64_t>(number(*rope, "original_max_position_embeddings", 8192));
  if (c.rope_scaling.factor <= 0 || c.rope_scaling.high_freq_factor <= c.rope_scaling.low_freq_factor)
    throw InputError(fmt::format("{}: llama3 rope scaling {} needs factor > 0 and high_freq_factor > low_freq_factor",
                                 source, rope->dump()));
}

}  // namespace

nlohmann::json hf_config(const model::LlamaConfig& c, int64_t eos_token_id) {
  nlohmann::json json = {
      {"architectures", {hf_architecture(c.family)}},
      {"model_type", c.family},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_heads},
      {"num_key_value_heads", c.num_kv_heads},
      {"head_dim", c.head_dim()},
      {"max_position_embeddings", c.max_seq_len},
      {"rope_theta", c.rope_theta},
      {"rope_scaling", rope_scaling_json(c.rope_scaling)},
      {"rms_norm_eps", c.norm_eps},
      {"tie_word_embeddings", c.tie_embeddings},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"mlp_bias", false},
      {"initializer_range", c.init_std},
      {"bos_token_id", eos_token_id},
      {"eos_token_id", eos_token_id},
      {"torch_dtype", "float32"},
      {"use_cache", true},
  };
  // qwen2's q, k and v biases are implied by its class; its sliding window is off.
  if (c.family == "qwen2") {
    json.erase("attention_bias");
    json.erase("mlp_bias");
    json["use_sliding_window"] = false;
  }
  return json;
}

model::LlamaConfig llama_config_from_hf(const nlohmann::json& json, const std::string& source) {
  auto field = [&](const char* name) -> const nlohmann::json& {
    if (!json.contains(name)) throw InputError(fmt::format("{}: missing field \"{}\"", source, name));
    return json.at(name);
  };
  auto integer = [&](const char* name) {
    const auto& value = field(name);
    if (!value.is_number_integer()) throw InputError(fmt::format("{}: field \"{}\" must be an integer", source, name));
    return value.get<int64_t>();
  };
  auto number = [&](const char* name, double fallback) {
    if (!json.contains(name)) return fallback;
    const auto& value = json.at(name);
    if (!value.is_number()) throw InputError(fmt::format("{}: field \"{}\" must be a number", source, name));
    return value.get<double>();
  };
  model::LlamaConfig c;
  c.family = json.value("model_type", std::string("llama"));
  if (!std::any_of(std::begin(kHfFamilies), std::end(kHfFamilies),
                   [&](const HfFamily& f) { return c.family == f.family; }))
    throw InputError(fmt::format("{}: model_type \"{}\" is not a family xtrain trains (llama, qwen2, qwen3)", source,
                                 c.family));
  c.vocab_size = integer("vocab_size");
  c.hidden_size = integer("hidden_size");
  c.intermediate_size = integer("intermediate_size");
  c.num_layers = integer("num_hidden_layers");
  c.num_heads = integer("num_attention_heads");
  c.num_kv_heads = json.contains("num_key_value_heads") ? integer("num_key_value_heads") : c.num_heads;
  c.max_seq_len = integer("max_position_embeddings");
  read_rope(json, source, c);
  c.norm_eps = number("rms_norm_eps", 1e-6);
  c.init_std = number("initializer_range", 0.02);
  c.tie_embeddings = json.value("tie_word_embeddings", false);
  if (json.contains("head_dim") && !json.at("head_dim").is_null()) c.head_dim_override = integer("head_dim");
  if (c.num_heads <= 0 || c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0 ||
      (c.head_dim_override <= 0 && c.hidden_size % c.num_heads != 0))
    throw InputError(fmt::format("{}: inconsistent head counts (hidden_size {}, heads {}, kv heads {})",
                                 source, c.hidden_size, c.num_heads, c.num_kv_heads));
  if (c.head_dim_override == c.hidden_size / c.num_heads) c.head_dim_override = 0;
  if (json.contains("layer_types") && json.at("layer_types").is_array())
    for (const auto& type : json.at("layer_types"))
      if (type != "full_attention")
        throw InputError(fmt::format("{}: layer_types holds {}; xtrain's layers attend to the whole sequence", source,
                                     type.dump()));
  if (json.value("hidden_act", std::string("silu")) != "silu")
    throw InputError(fmt::format("{}: hidden_act \"{}\"; xtrain's MLP is SwiGLU (silu)", source,
                                 json.value("hidden_act", std::string())));
  if (c.family != "qwen2" && json.value("attention_bias", false))
    throw InputError(fmt::format("{}: attention_bias is true; xtrain's {} has no attention biases", source, c.family));
  if (json.value("mlp_bias", false))
    throw InputError(fmt::format("{}: mlp_bias is true; xtrain's MLP has no biases", source));
  if (c.family == "qwen2" && json.value("use_sliding_window", false))
    throw InputError(fmt::format("{}: use_sliding_window is true; xtrain's qwen2 attends to the whole sequence", source));
  return c;
}


nlohmann::json read_hf_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  if (!std::filesystem::is_regular_file(path))
    throw InputError(fmt::format("{}: not found; a Hugging Face model folder holds config.json and "
                                 "model.safetensors (or model.safetensors.index.json and its files)",
                                 path));
  try {
    return nlohmann::json::parse(util::read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: invalid JSON: {}", path, e.what()));
  }
}

nlohmann::json hf_generation_config(int64_t eos_token_id) {
  return {{"_from_model_config", true}, {"bos_token_id", eos_token_id}, {"eos_token_id", eos_token_id}};
}

}  // namespace xtrain::ckpt

#include "model/spec/llava_family.h"

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/spec/clip_family.h"
#include "model/spec/hf_fields.h"
#include "model/spec/llama_family.h"
#include "util/input_error.h"

namespace xtrain::model {
namespace {

constexpr int64_t kMaxImageSize = 16384;
constexpr int64_t kMaxImageChannels = 64;

nlohmann::json llava_config(const ModelConfig& c, int64_t eos_token_id) {
  ModelConfig text = c;
  text.family = "llama";
  text.vision = {};
  auto text_json = llama_spec().to_hf_config(text, eos_token_id);
  text_json.erase("architectures");
  text_json.erase("torch_dtype");
  const auto& v = c.vision;
  return {{"architectures", {"LlavaForConditionalGeneration"}},
          {"model_type", "llava"},
          {"text_config", text_json},
          {"vision_config", clip_vision_config_json(v)},
          {"image_token_index", v.image_token_index},
          {"image_seq_length", v.image_seq_length},
          {"projector_hidden_act", "gelu"},
          {"multimodal_projector_bias", true},
          {"vision_feature_layer", v.feature_layer},
          {"vision_feature_select_strategy", v.feature_select},
          {"tie_word_embeddings", c.tie_embeddings},
          {"torch_dtype", "float32"}};
}

// Reads a field of `json` (the object at `where` in source) as T, or `fallback` when absent, as
// transformers' config classes default it.
template <typename T>
T read(const nlohmann::json& json, const char* name, T fallback, const std::string& where) {
  if (!json.contains(name) || json.at(name).is_null()) return fallback;
  const auto& value = json.at(name);
  const bool ok = std::is_same_v<T, std::string>    ? value.is_string()
                  : std::is_same_v<T, bool>         ? value.is_boolean()
                  : std::is_floating_point_v<T>     ? value.is_number()
                                                    : value.is_number_integer();
  if (!ok) throw InputError(fmt::format("{}: field \"{}\" has the wrong type ({})", where, name, value.dump()));
  if constexpr (std::is_same_v<T, int64_t>) return HfFields::integer_of(value, where, name);
  if constexpr (std::is_floating_point_v<T>) return HfFields::number_of(value, where, name);
  return value.get<T>();
}

const nlohmann::json& sub_config(const nlohmann::json& json, const char* name, const std::string& source) {
  if (!json.contains(name) || !json.at(name).is_object())
    throw InputError(fmt::format("{}: missing object \"{}\"", source, name));
  return json.at(name);
}

// CLIPVisionConfig's fields, with its defaults; what the tower does not compute is refused.
VisionConfig vision_from_hf(const nlohmann::json& json, const std::string& source) {
  const std::string where = source + " vision_config";
  const auto type = read<std::string>(json, "model_type", "clip_vision_model", where);
  if (type != "clip_vision_model")
    throw InputError(fmt::format("{}: model_type \"{}\"; xtrain's llava has a CLIP vision tower (clip_vision_model)",
                                 where, type));
  VisionConfig v;
  v.hidden_size = read<int64_t>(json, "hidden_size", 768, where);
  v.intermediate_size = read<int64_t>(json, "intermediate_size", 3072, where);
  v.num_layers = read<int64_t>(json, "num_hidden_layers", 12, where);
  v.num_heads = read<int64_t>(json, "num_attention_heads", 12, where);
  v.image_size = read<int64_t>(json, "image_size", 224, where);
  v.patch_size = read<int64_t>(json, "patch_size", 32, where);
  v.num_channels = read<int64_t>(json, "num_channels", 3, where);
  v.norm_eps = read<double>(json, "layer_norm_eps", 1e-5, where);
  v.init_std = read<double>(json, "initializer_range", 0.02, where);
  v.projection_dim = read<int64_t>(json, "projection_dim", 512, where);
  if (v.num_layers < 1 || v.num_heads < 1 || v.hidden_size % v.num_heads != 0)
    throw InputError(fmt::format("{}: hidden_size {} does not divide into num_attention_heads {} (num_hidden_layers {})",
                                 where, v.hidden_size, v.num_heads, v.num_layers));
  if (v.patch_size < 1 || v.image_size < v.patch_size)
    throw InputError(fmt::format("{}: image_size {} and patch_size {} give no patch", where, v.image_size, v.patch_size));
  // The tower's other sizes are checked against the recipe's ranges of the language model's
  // (config/hf_import.cpp); these have no recipe key, and their products must not overflow.
  if (v.image_size > kMaxImageSize)
    throw InputError(fmt::format("{}: image_size {} is more than {} pixels a side", where, v.image_size, kMaxImageSize));
  if (v.num_channels < 1 || v.num_channels > kMaxImageChannels)
    throw InputError(fmt::format("{}: num_channels {} must be between 1 and {}", where, v.num_channels,
                                 kMaxImageChannels));
  const auto act = read<std::string>(json, "hidden_act", "quick_gelu", where);
  if (act != "quick_gelu")
    throw InputError(fmt::format("{}: hidden_act \"{}\"; xtrain's CLIP tower computes quick_gelu", where, act));
  return v;
}

// LlamaConfig's defaults for what a text_config leaves out (the Hub's llava configs list few fields).
nlohmann::json text_with_defaults(nlohmann::json text) {
  const nlohmann::json defaults = {{"vocab_size", 32000},          {"hidden_size", 4096},
                                   {"intermediate_size", 11008},   {"num_hidden_layers", 32},
                                   {"num_attention_heads", 32},    {"max_position_embeddings", 2048},
                                   {"rms_norm_eps", 1e-6}};
  for (const auto& [key, value] : defaults.items())
    if (!text.contains(key) || text.at(key).is_null()) text[key] = value;
  return text;
}

ModelConfig config_from_llava(const nlohmann::json& json, const std::string& source) {
  const auto& text_json = sub_config(json, "text_config", source);
  const std::string text_where = source + " text_config";
  const auto text_type = read<std::string>(text_json, "model_type", "llama", text_where);
  if (text_type != "llama")
    throw InputError(fmt::format("{}: model_type \"{}\"; xtrain's llava has a llama language model", text_where,
                                 text_type));
  ModelConfig c = llama_spec().from_hf_config(text_with_defaults(text_json), text_where);
  c.family = "llava";
  c.tie_embeddings = read<bool>(json, "tie_word_embeddings", c.tie_embeddings, source);
  auto& v = c.vision = vision_from_hf(sub_config(json, "vision_config", source), source);
  if (json.contains("vision_feature_layer") && json.at("vision_feature_layer").is_array())
    throw InputError(fmt::format("{}: vision_feature_layer {} is a list; xtrain's llava takes one layer's features",
                                 source, json.at("vision_feature_layer").dump()));
  v.feature_layer = read<int64_t>(json, "vision_feature_layer", -2, source);
  if (v.feature_depth() < 0 || v.feature_depth() > v.num_layers)
    throw InputError(fmt::format("{}: vision_feature_layer {} is not a hidden state of a {}-layer tower", source,
                                 v.feature_layer, v.num_layers));
  v.feature_select = read<std::string>(json, "vision_feature_select_strategy", "default", source);
  if (v.feature_select != "default" && v.feature_select != "full")
    throw InputError(fmt::format("{}: vision_feature_select_strategy \"{}\"; xtrain computes \"default\" and \"full\"",
                                 source, v.feature_select));
  v.image_token_index = read<int64_t>(json, "image_token_index", read<int64_t>(json, "image_token_id", 32000, source),
                                      source);
  if (v.image_token_index < 0 || v.image_token_index >= c.vocab_size)
    throw InputError(fmt::format("{}: image_token_index {} is outside the vocabulary of {}", source,
                                 v.image_token_index, c.vocab_size));
  v.image_seq_length = read<int64_t>(json, "image_seq_length", 576, source);
  const auto act = read<std::string>(json, "projector_hidden_act", "gelu", source);
  if (act != "gelu")
    throw InputError(fmt::format("{}: projector_hidden_act \"{}\"; xtrain's projector computes the exact GELU", source,
                                 act));
  if (!read<bool>(json, "multimodal_projector_bias", true, source))
    throw InputError(fmt::format("{}: multimodal_projector_bias is false; xtrain's projector has biases", source));
  return c;
}

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

// transformers' module names and older checkpoints' names -> those of its checkpoints (xtrain's).
std::string llava_from_hf_name(const std::string& name) {
  static const std::vector<std::pair<std::string, std::string>> renames = {
      {"vision_tower.vision_model.", "vision_tower."},
      {"model.vision_tower.", "vision_tower."},
      {"model.multi_modal_projector.", "multi_modal_projector."},
      {"model.language_model.", "language_model.model."},
      {"lm_head.", "language_model.lm_head."}};
  for (const auto& [from, to] : renames)
    if (starts_with(name, from)) return to + name.substr(from.size());
  return name;
}

}  // namespace

ModelSpec llava_spec() {
  ModelSpec spec;
  spec.family = "llava";
  spec.hf_architecture = "LlavaForConditionalGeneration";
  spec.hf_model_type = "llava";
  spec.description = "vision-language: a CLIP ViT whose projected features replace the image tokens of a llama";
  // Not split by tensor or pipeline parallelism yet (FSDP shards it).
  spec.capabilities.images = true;
  spec.architecture = Architecture::llava;
  spec.to_hf_config = llava_config;
  spec.from_hf_config = config_from_llava;
  spec.to_hf_name = [](const std::string& name) { return name; };
  spec.from_hf_name = llava_from_hf_name;
  spec.parts = {{"vision_tower", "vision_tower."},
                {"projector", "multi_modal_projector."},
                {"language_model", "language_model."}};
  // Matrices (and the patch convolution) decay; norm gains, biases and the class token do not.
  spec.decays = [](const std::string& /*name*/, int64_t dims) { return dims >= 2; };
  spec.check = [](const ModelConfig& c) {
    std::vector<std::pair<std::string, std::string>> problems;
    if (!c.vision.enabled())
      problems.emplace_back("model.init_from", "llava takes its vision tower's shape from a Hugging Face folder: set "
                                               "model.init_from hf:DIR");
    if (c.num_experts > 0)
      problems.emplace_back("model.num_experts", "llava's language model is a dense llama: leave num_experts at 0");
    return problems;
  };
  return spec;
}

}  // namespace xtrain::model

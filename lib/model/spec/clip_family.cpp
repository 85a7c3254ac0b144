#include "model/spec/clip_family.h"

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/spec/hf_fields.h"
#include "util/input_error.h"

namespace xtrain::model {
namespace {

constexpr int64_t kMaxClipImageSize = 16384;
constexpr int64_t kMaxClipImageChannels = 64;

nlohmann::json clip_config(const ModelConfig& c, int64_t /*eos_token_id: the text tower's own*/) {
  const auto& v = c.vision;
  const nlohmann::json text = {{"model_type", "clip_text_model"},
                               {"vocab_size", c.vocab_size},
                               {"hidden_size", c.hidden_size},
                               {"intermediate_size", c.intermediate_size},
                               {"num_hidden_layers", c.num_layers},
                               {"num_attention_heads", c.num_heads},
                               {"max_position_embeddings", c.max_seq_len},
                               {"hidden_act", "quick_gelu"},
                               {"layer_norm_eps", c.norm_eps},
                               {"attention_dropout", 0.0},
                               {"initializer_range", c.init_std},
                               {"initializer_factor", 1.0},
                               {"pad_token_id", c.pad_token_id},
                               {"eos_token_id", c.contrastive.eos_token_id},
                               {"projection_dim", v.projection_dim}};
  return {{"architectures", {"CLIPModel"}},
          {"model_type", "clip"},
          {"text_config", text},
          {"vision_config", clip_vision_config_json(v)},
          {"projection_dim", v.projection_dim},
          {"logit_scale_init_value", c.contrastive.logit_scale_init},
          {"initializer_factor", 1.0},
          {"torch_dtype", "float32"}};
}

const nlohmann::json& clip_sub_config(const nlohmann::json& json, const char* name, const std::string& source) {
  if (!json.contains(name) || !json.at(name).is_object())
    throw InputError(fmt::format("{}: missing object \"{}\"; a CLIPModel config.json has one", source, name));
  return json.at(name);
}

void clip_refuse_other_activation(const HfFields& f, const std::string& where) {
  const auto act = f.text("hidden_act", "quick_gelu");
  if (act != "quick_gelu")
    throw InputError(fmt::format("{}: hidden_act \"{}\"; xtrain's CLIP computes quick_gelu", where, act));
}

// CLIPTextConfig's fields, with its defaults, into the model's own.
void clip_text_from_hf(const nlohmann::json& json, const std::string& where, ModelConfig& c) {
  const HfFields f(json, where);
  c.vocab_size = f.integer("vocab_size", 49408);
  c.hidden_size = f.integer("hidden_size", 512);
  c.intermediate_size = f.integer("intermediate_size", 2048);
  c.num_layers = f.integer("num_hidden_layers", 12);
  c.num_heads = c.num_kv_heads = f.integer("num_attention_heads", 8);
  c.max_seq_len = f.integer("max_position_embeddings", 77);
  c.norm_eps = f.number("layer_norm_eps", 1e-5);
  c.init_std = f.number("initializer_range", 0.02);
  c.pad_token_id = f.integer("pad_token_id", 1);
  c.contrastive.eos_token_id = f.integer("eos_token_id", 49407);
  clip_refuse_other_activation(f, where);
  if (c.num_layers < 1 || c.num_heads < 1 || c.hidden_size % c.num_heads != 0)
    throw InputError(fmt::format("{}: hidden_size {} does not divide into num_attention_heads {} (num_hidden_layers {})",
                                 where, c.hidden_size, c.num_heads, c.num_layers));
}

// CLIPVisionConfig's fields, with its defaults.
VisionConfig clip_vision_from_hf(const nlohmann::json& json, const std::string& where) {
  const HfFields f(json, where);
  VisionConfig v;
  v.hidden_size = f.integer("hidden_size", 768);
  v.intermediate_size = f.integer("intermediate_size", 3072);
  v.num_layers = f.integer("num_hidden_layers", 12);
  v.num_heads = f.integer("num_attention_heads", 12);
  v.image_size = f.integer("image_size", 224);
  v.patch_size = f.integer("patch_size", 32);
  v.num_channels = f.integer("num_channels", 3);
  v.norm_eps = f.number("layer_norm_eps", 1e-5);
  v.init_std = f.number("initializer_range", 0.02);
  clip_refuse_other_activation(f, where);
  if (v.num_layers < 1 || v.num_heads < 1 || v.hidden_size % v.num_heads != 0)
    throw InputError(fmt::format("{}: hidden_size {} does not divide into num_attention_heads {} (num_hidden_layers {})",
                                 where, v.hidden_size, v.num_heads, v.num_layers));
  if (v.patch_size < 1 || v.image_size < v.patch_size || v.image_size > kMaxClipImageSize)
    throw InputError(fmt::format("{}: image_size {} and patch_size {} give no patch (image_size at most {})", where,
                                 v.image_size, v.patch_size, kMaxClipImageSize));
  if (v.num_channels < 1 || v.num_channels > kMaxClipImageChannels)
    throw InputError(fmt::format("{}: num_channels {} must be between 1 and {}", where, v.num_channels,
                                 kMaxClipImageChannels));
  return v;
}

ModelConfig config_from_clip(const nlohmann::json& json, const std::string& source) {
  ModelConfig c;
  c.family = "clip";
  clip_text_from_hf(clip_sub_config(json, "text_config", source), source + " text_config", c);
  c.vision = clip_vision_from_hf(clip_sub_config(json, "vision_config", source), source + " vision_config");
  const HfFields f(json, source);
  c.vision.projection_dim = f.integer("projection_dim", 512);
  c.contrastive.logit_scale_init = f.number("logit_scale_init_value", 2.6592);
  if (c.vision.projection_dim < 1)
    throw InputError(fmt::format("{}: projection_dim {} must be positive", source, c.vision.projection_dim));
  if (f.number("initializer_factor", 1.0) != 1.0)
    throw InputError(fmt::format("{}: initializer_factor {}; xtrain's CLIP draws its init at factor 1", source,
                                 f.number("initializer_factor", 1.0)));
  return c;
}

}  // namespace

nlohmann::json clip_vision_config_json(const VisionConfig& v) {
  return {{"model_type", "clip_vision_model"},
          {"hidden_size", v.hidden_size},
          {"intermediate_size", v.intermediate_size},
          {"num_hidden_layers", v.num_layers},
          {"num_attention_heads", v.num_heads},
          {"image_size", v.image_size},
          {"patch_size", v.patch_size},
          {"num_channels", v.num_channels},
          {"layer_norm_eps", v.norm_eps},
          {"hidden_act", "quick_gelu"},
          {"attention_dropout", 0.0},
          {"initializer_range", v.init_std},
          {"initializer_factor", 1.0},
          {"projection_dim", v.projection_dim}};
}

ModelSpec clip_spec() {
  ModelSpec spec;
  spec.family = "clip";
  spec.hf_architecture = "CLIPModel";
  spec.hf_model_type = "clip";
  spec.description = "contrastive image-text: a causal text tower and a ViT, projected and scored by cosine "
                     "similarity; CLIP's symmetric loss over (image, caption) pairs, negatives from the global batch";
  // Not split by tensor, pipeline, context or expert parallelism (rules/contrastive.cpp; FSDP
  // shards it); it does not generate.
  spec.capabilities.causal = false;
  spec.capabilities.contrastive = true;
  spec.architecture = Architecture::clip;
  spec.to_hf_config = clip_config;
  spec.from_hf_config = config_from_clip;
  spec.to_hf_name = spec.from_hf_name = [](const std::string& name) { return name; };
  // Older checkpoints store the position ids buffers.
  spec.hf_unused = [](const ModelConfig&, const std::string& name) {
    return name == "text_model.embeddings.position_ids" || name == "vision_model.embeddings.position_ids";
  };
  // logit_scale, a one-element parameter, is stored as transformers' scalar (hf_stored_tensors).
  spec.hf_parts = [](const std::string& name, int64_t /*first_dimension*/) {
    return name == "logit_scale" ? std::vector<std::string>{"logit_scale"} : std::vector<std::string>{};
  };
  spec.parts = {{"vision_model", "vision_model."},
                {"text_model", "text_model."},
                {"visual_projection", "visual_projection."},
                {"text_projection", "text_projection."}};
  // As open_clip: matrices decay (the embedding tables too); gains, biases, the class token and
  // logit_scale do not.
  spec.decays = [](const std::string& /*name*/, int64_t dims) { return dims >= 2; };
  spec.check = [](const ModelConfig& c) {
    std::vector<std::pair<std::string, std::string>> problems;
    if (c.tie_embeddings)
      problems.emplace_back("model.tie_embeddings", "clip has no output head to tie: set it false");
    if (c.num_kv_heads != 0 && c.num_kv_heads != c.num_heads)
      problems.emplace_back("model.num_kv_heads", "clip's attention has as many key/value heads as query heads");
    if (!c.vision.enabled())
      problems.emplace_back("model.init_from", "clip takes its image tower's shape from a Hugging Face folder: set "
                                               "model.init_from to a CLIPModel folder");
    return problems;
  };
  return spec;
}

}  // namespace xtrain::model

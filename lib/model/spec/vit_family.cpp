#include "model/spec/vit_family.h"

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/spec/hf_fields.h"
#include "util/input_error.h"

namespace xtrain::model {
namespace {

constexpr int64_t kMaxVitImageSize = 16384;
constexpr int64_t kMaxVitImageChannels = 64;

// Dropout: model.dropout, for the hidden states and the attention probabilities alike.
nlohmann::json vit_config(const ModelConfig& c, int64_t /*eos_token_id: images have none*/) {
  nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
  for (int64_t i = 0; i < c.vocab_size; ++i) {
    id2label[std::to_string(i)] = fmt::format("LABEL_{}", i);
    label2id[fmt::format("LABEL_{}", i)] = i;
  }
  return {{"architectures", {"ViTForImageClassification"}},
          {"model_type", "vit"},
          {"hidden_size", c.hidden_size},
          {"num_hidden_layers", c.num_layers},
          {"num_attention_heads", c.num_heads},
          {"intermediate_size", c.intermediate_size},
          {"hidden_act", "gelu"},
          {"hidden_dropout_prob", c.dropout},
          {"attention_probs_dropout_prob", c.dropout},
          {"initializer_range", c.init_std},
          {"layer_norm_eps", c.norm_eps},
          {"image_size", c.vision.image_size},
          {"patch_size", c.vision.patch_size},
          {"num_channels", c.vision.num_channels},
          {"qkv_bias", true},
          {"id2label", id2label},
          {"label2id", label2id},
          {"torch_dtype", "float32"}};
}

// transformers' num_labels: the size of id2label when the file has one, else num_labels, else 2.
int64_t vit_num_labels(const nlohmann::json& json, const HfFields& f) {
  if (json.contains("id2label") && json.at("id2label").is_object()) return static_cast<int64_t>(json.at("id2label").size());
  return f.integer("num_labels", 2);
}

ModelConfig config_from_vit(const nlohmann::json& json, const std::string& source) {
  const HfFields f(json, source);
  ModelConfig c;
  c.family = "vit";
  c.hidden_size = f.integer("hidden_size", 768);
  c.num_layers = f.integer("num_hidden_layers", 12);
  c.num_heads = c.num_kv_heads = f.integer("num_attention_heads", 12);
  c.intermediate_size = f.integer("intermediate_size", 3072);
  c.norm_eps = f.number("layer_norm_eps", 1e-12);
  c.init_std = f.number("initializer_range", 0.02);
  c.vocab_size = vit_num_labels(json, f);
  auto& v = c.vision;
  v.image_size = f.integer("image_size", 224);
  v.patch_size = f.integer("patch_size", 16);
  v.num_channels = f.integer("num_channels", 3);
  if (c.num_heads <= 0 || c.hidden_size % c.num_heads != 0)
    throw InputError(fmt::format("{}: hidden_size {} does not divide into num_attention_heads {}", source,
                                 c.hidden_size, c.num_heads));
  if (c.vocab_size < 2)
    throw InputError(fmt::format("{}: {} labels; an image classifier needs at least 2 (id2label or num_labels)",
                                 source, c.vocab_size));
  if (v.patch_size < 1 || v.image_size < v.patch_size || v.image_size > kMaxVitImageSize)
    throw InputError(fmt::format("{}: image_size {} and patch_size {} give no patch (image_size at most {})", source,
                                 v.image_size, v.patch_size, kMaxVitImageSize));
  if (v.num_channels < 1 || v.num_channels > kMaxVitImageChannels)
    throw InputError(fmt::format("{}: num_channels {} must be between 1 and {}", source, v.num_channels,
                                 kMaxVitImageChannels));
  c.max_seq_len = v.num_patches() + 1;
  if (f.text("hidden_act", "gelu") != "gelu")
    throw InputError(fmt::format("{}: hidden_act \"{}\"; xtrain's ViT computes the exact GELU (\"gelu\")", source,
                                 f.text("hidden_act", "")));
  if (!f.boolean("qkv_bias", true))
    throw InputError(fmt::format("{}: qkv_bias is false; xtrain's ViT has query, key and value biases", source));
  const auto problem_type = f.text("problem_type", "single_label_classification");
  if (problem_type != "single_label_classification")
    throw InputError(fmt::format("{}: problem_type \"{}\"; xtrain's ViT trains single-label classification (one "
                                 "integer label an image)",
                                 source, problem_type));
  return c;
}

}  // namespace

ModelSpec vit_spec() {
  ModelSpec spec;
  spec.family = "vit";
  spec.hf_architecture = "ViTForImageClassification";
  spec.hf_model_type = "vit";
  spec.description = "image classifier: patch embedding, class token, pre-LN encoder, GELU; one label an image";
  // Not split by tensor or pipeline parallelism (FSDP shards it); it does not generate.
  spec.capabilities.causal = false;
  spec.capabilities.image_classes = true;
  spec.capabilities.dropout = true;  // model/vit/vit.h
  spec.architecture = Architecture::vit;
  spec.to_hf_config = vit_config;
  spec.from_hf_config = config_from_vit;
  spec.to_hf_name = spec.from_hf_name = [](const std::string& name) { return name; };
  // As timm's and transformers' fine-tuning recipes: biases, LayerNorm gains, the class token and
  // the position embeddings do not decay.
  spec.decays = [](const std::string& name, int64_t dims) {
    return dims >= 2 && name.find("cls_token") == std::string::npos &&
           name.find("position_embeddings") == std::string::npos;
  };
  spec.check = [](const ModelConfig& c) {
    std::vector<std::pair<std::string, std::string>> problems;
    if (c.tie_embeddings)
      problems.emplace_back("model.tie_embeddings", "vit's classifier is its own layer: set it false");
    if (c.num_kv_heads != 0 && c.num_kv_heads != c.num_heads)
      problems.emplace_back("model.num_kv_heads", "vit's attention has as many key/value heads as query heads");
    return problems;
  };
  return spec;
}

}  // namespace xtrain::model

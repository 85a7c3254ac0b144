#include "config/hf_import.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/option_registry.h"
#include "model/spec/hf_config.h"
#include "model/spec/model_spec.h"

namespace xtrain::config {

namespace {

// A recipe key that config.json fills, and the config.json fields it is read from as the
// families spell them (empty: a field with no one name, such as the rope scaling's parts).
struct ImportedKey {
  const char* key;
  std::vector<const char*> fields;
};

// In the order they are taken, which is the order their problems are listed.
const std::vector<ImportedKey> kShape = {
    {"model.family", {}},
    {"model.vocab_size", {"vocab_size"}},
    {"model.hidden_size", {"hidden_size"}},
    {"model.num_layers", {"num_hidden_layers"}},
    {"model.num_heads", {"num_attention_heads"}},
    {"model.intermediate_size", {"intermediate_size"}},
    {"model.max_seq_len", {"max_position_embeddings"}},
    {"model.rope_theta", {"rope_theta"}},
    {"model.rope_scaling_factor", {}},
    {"model.rope_low_freq_factor", {}},
    {"model.rope_high_freq_factor", {}},
    {"model.rope_original_max_len", {}},
    {"model.norm_eps", {"rms_norm_eps", "layer_norm_eps"}},
    {"model.tie_embeddings", {}},
    {"model.feed_forward", {"feed_forward_proj"}},
    {"model.num_decoder_layers", {"num_decoder_layers"}},
    {"model.relative_buckets", {"relative_attention_num_buckets"}},
    {"model.relative_max_distance", {"relative_attention_max_distance"}},
    {"model.init_std", {"initializer_range"}},
    {"model.num_experts", {"num_experts", "num_local_experts", "n_routed_experts"}},
    {"model.num_experts_per_tok", {"num_experts_per_tok"}},
    {"model.moe_intermediate_size", {"moe_intermediate_size", "intermediate_size"}},
    {"model.norm_topk_prob", {}},
    {"model.first_k_dense", {"first_k_dense_replace"}},
    {"model.moe_layer_step", {"decoder_sparse_step"}},
    {"model.n_group", {"n_group"}},
    {"model.topk_group", {"topk_group"}},
    {"model.routed_scaling_factor", {"routed_scaling_factor"}},
    {"model.num_shared_experts", {"n_shared_experts"}},
    {"model.q_lora_rank", {"q_lora_rank"}},
    {"model.kv_lora_rank", {"kv_lora_rank"}},
    {"model.qk_nope_head_dim", {"qk_nope_head_dim"}},
    {"model.qk_rope_head_dim", {"qk_rope_head_dim"}},
    {"model.v_head_dim", {"v_head_dim"}},
    {"model.rope_interleave", {}},
    {"model.rope_beta_fast", {}},
    {"model.rope_beta_slow", {}},
    {"model.rope_mscale", {}},
    {"model.rope_mscale_all_dim", {}},
    {"model.rope_attention_factor", {}},
    {"model.rope_truncate", {}},
    {"model.rope_scaling_type", {}},
    {"model.router", {}},
    {"model.sliding_window", {"sliding_window"}},
    {"model.swiglu_limit", {"swiglu_limit"}},
    {"model.swiglu_alpha", {"swiglu_alpha"}},
};
// Taken once the heads passed their checks (the head size divides by them).
const ImportedKey kKvHeads = {"model.num_kv_heads", {"num_key_value_heads"}};
const ImportedKey kHeadDim = {"model.head_dim", {"head_dim"}};
const ImportedKey kPadToken = {"model.pad_token_id", {"pad_token_id"}};

class HfImport {
 public:
  HfImport(Recipe& recipe, RecipeReport& report)
      : recipe_(recipe), report_(report), registry_(OptionRegistry::instance()),
        dir_(recipe.model.init_from.substr(3)) {}

  bool run() {
    model::ModelConfig hf;
    try {
      json_ = ckpt::read_hf_config(dir_);
      hf = ckpt::model_config_from_hf(json_, dir_ + "/config.json");
    } catch (const InputError& e) {
      report_.refuse("model.init_from", e.what());
      return true;
    } catch (const nlohmann::json::exception& e) {  // a field of a type no family reader expected
      report_.refuse("model.init_from",
                     fmt::format("{}/config.json: a field has the wrong type ({}); compare the file with the model's "
                                 "config.json on the Hub",
                                 dir_, e.what()));
      return true;
    }
    import_dropout(hf.family);
    auto& m = recipe_.model;
    const int64_t kv_heads = m.num_kv_heads == 0 ? m.num_heads : m.num_kv_heads;  // as the recipe means them
    const int64_t head_dim = m.head_dim_override == 0 ? m.hidden_size / m.num_heads : m.head_dim_override;
    from_ = recipe_;
    static_cast<model::ModelConfig&>(from_.model) = hf;
    for (const auto& imported : kShape) take(imported);
    if (report_.is_set("model.layer_types") && m.layer_types != hf.layer_types)
      report_.refuse("model.layer_types",
                     fmt::format("differs from {}/config.json's layer_types; leave it out of the recipe "
                                 "(model.init_from takes the model's shape from config.json)",
                                 dir_));
    m.layer_types = hf.layer_types;
    if (refused_) return false;  // the head size divides by the heads refused
    take_value(kKvHeads, kv_heads, hf.num_kv_heads);
    take_value(kHeadDim, head_dim, hf.head_dim());
    m.num_kv_heads = hf.num_kv_heads;
    m.head_dim_override = hf.head_dim_override;
    m.vision = hf.vision;  // a vision-language model's tower: from the folder only
    vision_passes(hf.vision);
    m.contrastive = hf.contrastive;  // clip's end-of-text id and logit_scale init: from the folder only
    m.type_vocab_size = hf.type_vocab_size;  // bert's segment embeddings: as many rows as a vocabulary could have
    if (model::model_spec(hf.family).capabilities.pad_token) {
      passes("model.vocab_size", std::to_string(hf.type_vocab_size), "type_vocab_size");
      take(kPadToken);
    }
    // A training choice rather than a shape: the recipe may set another.
    if (!report_.is_set("model.router_aux_loss_coef")) m.router_aux_loss_coef = hf.router_aux_loss_coef;
    if (!report_.is_set("data.tokenizer") && std::filesystem::is_regular_file(dir_ + "/tokenizer.json"))
      recipe_.data.tokenizer = "hf:" + dir_;
    // A shape outside the recipe's ranges (a million layers) stops here, before anything is
    // derived from it or sized by it.
    return !refused_;
  }

 private:
  // The config.json field of an imported key: the first of its fields the file holds (at the
  // top or in text_config), so that a message names what the user sees.
  std::string field_in_file(const ImportedKey& imported) const {
    if (!json_.is_object()) return "";
    for (const char* field : imported.fields) {
      if (json_.contains(field)) return field;
      const auto text = json_.find("text_config");
      if (text != json_.end() && text->is_object() && text->contains(field))
        return std::string("text_config.") + field;
    }
    return "";
  }

  // value (as text) passes the check the registry declares for path, as the recipe's own value
  // would; field names it in config.json.
  bool passes(const std::string& path, const std::string& value, const std::string& field) {
    const Option* option = registry_.find(path);
    if (!option) return true;
    const auto problem = option->assign(YAML::Node(value), checked_);
    if (!problem) return true;
    report_.add(dir_ + "/config.json", field.empty() ? path : fmt::format("{} ({})", field, path),
                fmt::format("{}, as {} in a recipe; xtrain builds no such model: correct config.json, or start from "
                            "another folder",
                            *problem, path));
    refused_ = true;
    return false;
  }

  // The folder's value of a key, through the registry: checked, compared with the recipe's own
  // when the recipe sets it, and copied.
  void take(const ImportedKey& imported) {
    const Option& option = *registry_.find(imported.key);
    const std::string value = option.plain(from_);
    if (!passes(option.path, value, field_in_file(imported))) return;
    if (report_.is_set(option.path) && !option.same(recipe_, from_))
      disagree(option.path, option.plain(recipe_), value);
    option.copy(from_, recipe_);
  }

  // The same for a key whose recipe value means a size derived from fields (num_kv_heads 0:
  // num_heads), which is compared but not copied.
  void take_value(const ImportedKey& imported, int64_t given, int64_t value) {
    if (!passes(imported.key, std::to_string(value), field_in_file(imported))) return;
    if (report_.is_set(imported.key) && given != value)
      disagree(imported.key, std::to_string(given), std::to_string(value));
  }

  void disagree(const std::string& path, const std::string& given, const std::string& value) {
    report_.refuse(path, fmt::format("{}, but {}/config.json says {}; leave it out of the recipe (model.init_from "
                                     "takes the model's shape from config.json)",
                                     given, dir_, value));
  }

  // A vision tower's sizes have no recipe keys of their own: each passes the check of the
  // language model's key of the same meaning.
  void vision_passes(const model::VisionConfig& v) {
    if (!v.enabled()) return;
    passes("model.hidden_size", std::to_string(v.hidden_size), "vision_config.hidden_size");
    passes("model.num_layers", std::to_string(v.num_layers), "vision_config.num_hidden_layers");
    passes("model.num_heads", std::to_string(v.num_heads), "vision_config.num_attention_heads");
    passes("model.intermediate_size", std::to_string(v.intermediate_size), "vision_config.intermediate_size");
    passes("model.norm_eps", fmt::format("{}", v.norm_eps), "vision_config.layer_norm_eps");
    passes("model.init_std", fmt::format("{}", v.init_std), "vision_config.initializer_range");
  }

  // A folder's dropout. A family that computes dropout (capabilities.dropout) takes it, one
  // probability for its attention probabilities and hidden states alike; any other family
  // trains without it only when the recipe says so (model.dropout: 0), rather than silently.
  // A recipe's model.dropout wins over the folder's.
  void import_dropout(const std::string& family) {
    const auto dropout = ckpt::hf_dropout(json_);
    if (dropout.empty() || report_.is_set("model.dropout")) return;
    if (model::model_spec(family).capabilities.dropout) {
      const auto value = [&](const char* field) { return json_.value(field, nlohmann::json(0.0)); };
      const bool one = std::all_of(dropout.begin(), dropout.end(), [](const ckpt::HfDropout& d) {
        return d.field == "hidden_dropout_prob" || d.field == "attention_probs_dropout_prob";
      });
      // T5's dropout_rate is already one probability for every site.
      const bool rate = dropout.size() == 1 && dropout.front().field == "dropout_rate";
      if (rate || (one && value("hidden_dropout_prob") == value("attention_probs_dropout_prob"))) {
        recipe_.model.dropout = dropout.front().value;
        return;
      }
      report_.refuse("model.init_from",
                     fmt::format("{}/config.json: {}, but xtrain's {} applies one dropout probability to the "
                                 "attention probabilities and the hidden states; set model.dropout in the recipe",
                                 dir_, ckpt::describe(dropout), family));
      return;
    }
    const bool jitter = std::any_of(dropout.begin(), dropout.end(),
                                    [](const ckpt::HfDropout& d) { return d.field == "router_jitter_noise"; });
    report_.refuse("model.init_from",
                   fmt::format("{}/config.json: {}, but xtrain computes no dropout{}; add `model.dropout: 0` to the "
                               "recipe to fine-tune without dropout (the export keeps the config's values)",
                               dir_, ckpt::describe(dropout), jitter ? " (nor router jitter)" : ""));
  }

  Recipe& recipe_;
  RecipeReport& report_;
  const OptionRegistry& registry_;
  const std::string dir_;
  nlohmann::json json_;
  Recipe from_;     // the recipe with config.json's shape: what each key is copied from
  Recipe checked_;  // what the registry's checks write into
  bool refused_ = false;
};

}  // namespace

bool import_from_hf(Recipe& recipe, RecipeReport& report) {
  if (recipe.model.init_from.empty()) return true;
  return HfImport(recipe, report).run();
}

}  // namespace xtrain::config

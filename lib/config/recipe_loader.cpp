#include "config/recipe_loader.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <tuple>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "model/spec/hf_config.h"
#include "config/batch_geometry.h"
#include "config/foreign_keys.h"
#include "config/option_registry.h"
#include "data/sources/text_source.h"
#include "model/spec/model_spec.h"
#include "text/tokenizer.h"
#include "util/durable_file.h"

namespace xtrain::config {

std::string Diagnostic::str() const {
  return key.empty() ? fmt::format("{}: {}", where, message)
                     : fmt::format("{}: {}: {}", where, key, message);
}

namespace {

std::string join_diagnostics(const std::vector<Diagnostic>& diagnostics) {
  std::string text;
  for (const auto& d : diagnostics) text += (text.empty() ? "" : "\n") + d.str();
  return text;
}

std::string mark_text(const std::string& file, const YAML::Mark& mark) {
  return fmt::format("{}:{}:{}", file, mark.line + 1, mark.column + 1);
}

// Builds one Recipe from a YAML document and overrides, collecting every problem.
class RecipeBuilder {
 public:
  RecipeBuilder(std::string display_name, const LoadOptions& options)
      : file_(std::move(display_name)), options_(options),
        registry_(OptionRegistry::instance()), recipe_(registry_.defaults()) {}

  Recipe build(const std::string& text) {
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::ParserException& e) {
      report(mark_text(file_, e.mark), "", "invalid YAML: " + e.msg);
      throw RecipeError(diagnostics_);
    }
    read_document(root);
    for (const auto& override_text : options_.overrides) apply_override(override_text);
    check_required();
    resolve_derived();
    check_consistency();
    if (options_.check_files) check_files();
    if (!diagnostics_.empty()) throw RecipeError(diagnostics_);
    return recipe_;
  }

 private:
  void report(std::string where, std::string key, std::string message) {
    diagnostics_.push_back({std::move(where), std::move(key), std::move(message)});
  }

  void report_unknown(const std::string& where, const std::string& path) {
    if (auto hint = foreign_key_hint(path)) return report(where, path, fmt::format("unknown key ({})", *hint));
    auto suggestion = registry_.suggest(path);
    report(where, path,
           suggestion ? fmt::format("unknown key (did you mean {}?)", *suggestion)
                      : std::string("unknown key (run `xtrain options` for the list of keys)"));
  }

  void assign(const Option& option, const YAML::Node& value, const std::string& where) {
    if (auto problem = option.assign(value, recipe_)) report(where, option.path, *problem);
    set_at_[option.path] = where;
  }

  void read_document(const YAML::Node& root) {
    if (root.IsNull()) {
      report(file_ + ":1:1", "", "the recipe is empty (start with `name: my-run`)");
      return;
    }
    if (!root.IsMap()) {
      report(mark_text(file_, root.Mark()), "",
             "a recipe is a mapping of sections (name:, model:, data:, train:, ...)");
      return;
    }
    for (const auto& entry : root) {
      const std::string key = entry.first.Scalar();
      const std::string key_where = mark_text(file_, entry.first.Mark());
      if (const Option* option = registry_.find(key)) {
        assign(*option, entry.second, mark_text(file_, entry.second.Mark()));
      } else if (registry_.is_section(key)) {
        read_section(key, entry.second, key_where);
      } else {
        report_unknown(key_where, key);
      }
    }
  }

  void read_section(const std::string& section, const YAML::Node& node, const std::string& where) {
    if (node.IsNull()) return;
    if (!node.IsMap()) {
      report(where, section, "expected a mapping of keys under this section");
      return;
    }
    for (const auto& entry : node) {
      const std::string path = section + "." + entry.first.Scalar();
      if (const Option* option = registry_.find(path)) {
        assign(*option, entry.second, mark_text(file_, entry.second.Mark()));
        set_at_[path] = mark_text(file_, entry.first.Mark());
      } else {
        report_unknown(mark_text(file_, entry.first.Mark()), path);
      }
    }
  }

  void apply_override(const std::string& text) {
    const std::string where = "--set " + text;
    auto equals = text.find('=');
    if (equals == std::string::npos || equals == 0) {
      report(where, "", "expected key.path=value, e.g. --set train.steps=100");
      return;
    }
    const std::string path = text.substr(0, equals);
    const Option* option = registry_.find(path);
    if (!option) {
      report_unknown(where, path);
      return;
    }
    YAML::Node value;
    try {
      value = YAML::Load(text.substr(equals + 1));
    } catch (const YAML::ParserException& e) {
      report(where, path, "invalid YAML value: " + e.msg);
      return;
    }
    assign(*option, value, where);
  }

  void check_required() {
    for (const auto& option : registry_.options())
      if (option.required && !set_at_.count(option.path))
        report(file_ + ":1:1", option.path,
               fmt::format("required key missing (add `{}: ...` to the recipe)", option.path));
  }

  // Where a key was set, or the file itself for a defaulted key.
  std::string where(const std::string& path) const {
    auto it = set_at_.find(path);
    return it == set_at_.end() ? file_ : it->second;
  }

  // model.init_from hf:DIR: the model's shape from DIR/config.json and, unless the recipe names
  // one, the tokenizer from DIR. A shape key the recipe sets as well must agree. A checkpoint's
  // copy of the recipe (check_files off) is resolved already, and the folder may be gone.
  void resolve_init_from() {
    const std::string& spec = recipe_.model.init_from;
    if (spec.empty() || !options_.check_files) return;
    const std::string dir = spec.substr(3);
    model::ModelConfig hf;
    nlohmann::json json;
    try {
      json = ckpt::read_hf_config(dir);
      hf = ckpt::model_config_from_hf(json, dir + "/config.json");
    } catch (const InputError& e) {
      report(where("model.init_from"), "model.init_from", e.what());
      return;
    } catch (const nlohmann::json::exception& e) {  // a field of a type no family reader expected
      report(where("model.init_from"), "model.init_from",
             fmt::format("{}/config.json: a field has the wrong type ({}); compare the file with the model's "
                         "config.json on the Hub",
                         dir, e.what()));
      return;
    }
    check_hf_dropout(dir, json);
    hf_json_ = &json;
    auto& m = recipe_.model;
    const int64_t kv_heads = m.num_kv_heads == 0 ? m.num_heads : m.num_kv_heads;  // as the recipe means them
    const int64_t head_dim = m.head_dim_override == 0 ? m.hidden_size / m.num_heads : m.head_dim_override;
    take_from_hf(dir, "model.family", m.family, hf.family);
    take_from_hf(dir, "model.vocab_size", m.vocab_size, hf.vocab_size);
    take_from_hf(dir, "model.hidden_size", m.hidden_size, hf.hidden_size);
    take_from_hf(dir, "model.num_layers", m.num_layers, hf.num_layers);
    take_from_hf(dir, "model.num_heads", m.num_heads, hf.num_heads);
    take_from_hf(dir, "model.intermediate_size", m.intermediate_size, hf.intermediate_size);
    take_from_hf(dir, "model.max_seq_len", m.max_seq_len, hf.max_seq_len);
    take_from_hf(dir, "model.rope_theta", m.rope_theta, hf.rope_theta);
    take_from_hf(dir, "model.rope_scaling_factor", m.rope_scaling.factor, hf.rope_scaling.factor);
    take_from_hf(dir, "model.rope_low_freq_factor", m.rope_scaling.low_freq_factor, hf.rope_scaling.low_freq_factor);
    take_from_hf(dir, "model.rope_high_freq_factor", m.rope_scaling.high_freq_factor, hf.rope_scaling.high_freq_factor);
    take_from_hf(dir, "model.rope_original_max_len", m.rope_scaling.original_max_len, hf.rope_scaling.original_max_len);
    take_from_hf(dir, "model.norm_eps", m.norm_eps, hf.norm_eps);
    take_from_hf(dir, "model.tie_embeddings", m.tie_embeddings, hf.tie_embeddings);
    take_from_hf(dir, "model.init_std", m.init_std, hf.init_std);
    take_from_hf(dir, "model.num_experts", m.num_experts, hf.num_experts);
    take_from_hf(dir, "model.num_experts_per_tok", m.num_experts_per_tok, hf.num_experts_per_tok);
    take_from_hf(dir, "model.moe_intermediate_size", m.moe_intermediate_size, hf.moe_intermediate_size);
    take_from_hf(dir, "model.norm_topk_prob", m.norm_topk_prob, hf.norm_topk_prob);
    take_from_hf(dir, "model.first_k_dense", m.first_k_dense, hf.first_k_dense);
    take_from_hf(dir, "model.moe_layer_step", m.moe_layer_step, hf.moe_layer_step);
    take_from_hf(dir, "model.n_group", m.n_group, hf.n_group);
    take_from_hf(dir, "model.topk_group", m.topk_group, hf.topk_group);
    take_from_hf(dir, "model.routed_scaling_factor", m.routed_scaling_factor, hf.routed_scaling_factor);
    take_from_hf(dir, "model.num_shared_experts", m.num_shared_experts, hf.num_shared_experts);
    take_from_hf(dir, "model.q_lora_rank", m.latent.q_lora_rank, hf.latent.q_lora_rank);
    take_from_hf(dir, "model.kv_lora_rank", m.latent.kv_lora_rank, hf.latent.kv_lora_rank);
    take_from_hf(dir, "model.qk_nope_head_dim", m.latent.qk_nope_head_dim, hf.latent.qk_nope_head_dim);
    take_from_hf(dir, "model.qk_rope_head_dim", m.latent.qk_rope_head_dim, hf.latent.qk_rope_head_dim);
    take_from_hf(dir, "model.v_head_dim", m.latent.v_head_dim, hf.latent.v_head_dim);
    take_from_hf(dir, "model.rope_interleave", m.latent.rope_interleave, hf.latent.rope_interleave);
    take_from_hf(dir, "model.rope_beta_fast", m.rope_scaling.beta_fast, hf.rope_scaling.beta_fast);
    take_from_hf(dir, "model.rope_beta_slow", m.rope_scaling.beta_slow, hf.rope_scaling.beta_slow);
    take_from_hf(dir, "model.rope_mscale", m.rope_scaling.mscale, hf.rope_scaling.mscale);
    take_from_hf(dir, "model.rope_mscale_all_dim", m.rope_scaling.mscale_all_dim, hf.rope_scaling.mscale_all_dim);
    take_from_hf(dir, "model.rope_attention_factor", m.rope_scaling.attention_factor, hf.rope_scaling.attention_factor);
    take_from_hf(dir, "model.rope_truncate", m.rope_scaling.truncate, hf.rope_scaling.truncate);
    take_choice_from_hf(dir, "model.rope_scaling_type", m.rope_scaling.type, hf.rope_scaling.type);
    take_choice_from_hf(dir, "model.router", m.router, hf.router);
    take_from_hf(dir, "model.sliding_window", m.sliding_window, hf.sliding_window);
    take_from_hf(dir, "model.swiglu_limit", m.swiglu_limit, hf.swiglu_limit);
    take_from_hf(dir, "model.swiglu_alpha", m.swiglu_alpha, hf.swiglu_alpha);
    if (set_at_.count("model.layer_types") && m.layer_types != hf.layer_types)
      report(where("model.layer_types"), "model.layer_types",
             fmt::format("differs from {}/config.json's layer_types; leave it out of the recipe (model.init_from "
                         "takes the model's shape from config.json)",
                         dir));
    m.layer_types = hf.layer_types;
    if (hf_refused_) throw RecipeError(diagnostics_);  // the head size divides by the heads refused
    int64_t given_kv_heads = kv_heads, given_head_dim = head_dim;
    take_from_hf(dir, "model.num_kv_heads", given_kv_heads, hf.num_kv_heads);
    take_from_hf(dir, "model.head_dim", given_head_dim, hf.head_dim());
    m.num_kv_heads = hf.num_kv_heads;
    m.head_dim_override = hf.head_dim_override;
    m.vision = hf.vision;  // a vision-language model's tower: from the folder only
    check_vision_from_hf(dir, hf.vision);
    m.type_vocab_size = hf.type_vocab_size;  // bert's segment embeddings: as many rows as a vocabulary could have
    if (model::model_spec(hf.family).capabilities.pad_token)
      passes_registry_check(dir, "model.vocab_size", hf.type_vocab_size, "type_vocab_size");
    if (model::model_spec(hf.family).capabilities.pad_token)
      take_from_hf(dir, "model.pad_token_id", m.pad_token_id, hf.pad_token_id);
    // A training choice rather than a shape: the recipe may set another.
    if (!set_at_.count("model.router_aux_loss_coef")) m.router_aux_loss_coef = hf.router_aux_loss_coef;
    if (!set_at_.count("data.tokenizer") && std::filesystem::is_regular_file(dir + "/tokenizer.json"))
      recipe_.data.tokenizer = "hf:" + dir;
    hf_json_ = nullptr;
    // A shape outside the recipe's ranges (a million layers) stops here, before anything is
    // derived from it or sized by it.
    if (hf_refused_) throw RecipeError(diagnostics_);
  }

  // The config.json field a recipe key was read from, as the families spell it; the first one
  // the file holds (at the top or in text_config), so that the message names what the user sees.
  std::string hf_field_of(const std::string& path) const {
    static const std::map<std::string, std::vector<const char*>> kFields = {
        {"model.vocab_size", {"vocab_size"}},
        {"model.hidden_size", {"hidden_size"}},
        {"model.num_layers", {"num_hidden_layers"}},
        {"model.num_heads", {"num_attention_heads"}},
        {"model.num_kv_heads", {"num_key_value_heads"}},
        {"model.intermediate_size", {"intermediate_size"}},
        {"model.max_seq_len", {"max_position_embeddings"}},
        {"model.head_dim", {"head_dim"}},
        {"model.rope_theta", {"rope_theta"}},
        {"model.norm_eps", {"rms_norm_eps", "layer_norm_eps"}},
        {"model.init_std", {"initializer_range"}},
        {"model.num_experts", {"num_experts", "num_local_experts", "n_routed_experts"}},
        {"model.num_experts_per_tok", {"num_experts_per_tok"}},
        {"model.moe_intermediate_size", {"moe_intermediate_size", "intermediate_size"}},
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
        {"model.sliding_window", {"sliding_window"}},
        {"model.swiglu_limit", {"swiglu_limit"}},
        {"model.swiglu_alpha", {"swiglu_alpha"}},
        {"model.pad_token_id", {"pad_token_id"}}};
    const auto it = kFields.find(path);
    if (it == kFields.end() || !hf_json_ || !hf_json_->is_object()) return "";
    for (const char* field : it->second) {
      if (hf_json_->contains(field)) return field;
      const auto text = hf_json_->find("text_config");
      if (text != hf_json_->end() && text->is_object() && text->contains(field))
        return std::string("text_config.") + field;
    }
    return "";
  }

  // A value config.json gives passes the check the registry declares for its recipe key, as the
  // recipe's own value would: a folder cannot bring a shape the recipe could not. `field` names
  // the config.json field when it is not the one hf_field_of finds (the vision tower's).
  template <typename T>
  bool passes_registry_check(const std::string& dir, const std::string& path, const T& value,
                             const std::string& field = "") {
    const Option* option = registry_.find(path);
    if (!option) return true;
    const auto problem = option->assign(YAML::Node(yaml_text(value)), checked_);
    if (!problem) return true;
    const std::string named = field.empty() ? hf_field_of(path) : field;
    report(dir + "/config.json", named.empty() ? path : fmt::format("{} ({})", named, path),
           fmt::format("{}, as {} in a recipe; xtrain builds no such model: correct config.json, or start from "
                       "another folder",
                       *problem, path));
    hf_refused_ = true;
    return false;
  }

  static std::string yaml_text(int64_t value) { return std::to_string(value); }
  static std::string yaml_text(double value) { return fmt::format("{}", value); }
  static std::string yaml_text(bool value) { return value ? "true" : "false"; }
  static std::string yaml_text(const std::string& value) { return value; }
  template <typename E, typename = std::enable_if_t<std::is_enum_v<E>>>
  static std::string yaml_text(E value) { return to_string(value); }

  // A vision tower's sizes have no recipe keys of their own: each passes the check of the
  // language model's key of the same meaning.
  void check_vision_from_hf(const std::string& dir, const model::VisionConfig& v) {
    if (!v.enabled()) return;
    passes_registry_check(dir, "model.hidden_size", v.hidden_size, "vision_config.hidden_size");
    passes_registry_check(dir, "model.num_layers", v.num_layers, "vision_config.num_hidden_layers");
    passes_registry_check(dir, "model.num_heads", v.num_heads, "vision_config.num_attention_heads");
    passes_registry_check(dir, "model.intermediate_size", v.intermediate_size, "vision_config.intermediate_size");
    passes_registry_check(dir, "model.norm_eps", v.norm_eps, "vision_config.layer_norm_eps");
    passes_registry_check(dir, "model.init_std", v.init_std, "vision_config.initializer_range");
  }

  // xtrain computes no dropout: a folder trained with it is fine-tuned without it only when the
  // recipe says so (model.dropout: 0), rather than silently.
  void check_hf_dropout(const std::string& dir, const nlohmann::json& json) {
    const auto dropout = ckpt::hf_dropout(json);
    if (dropout.empty() || set_at_.count("model.dropout")) return;
    const bool jitter = std::any_of(dropout.begin(), dropout.end(),
                                    [](const ckpt::HfDropout& d) { return d.field == "router_jitter_noise"; });
    report(where("model.init_from"), "model.init_from",
           fmt::format("{}/config.json: {}, but xtrain computes no dropout{}; add `model.dropout: 0` to the recipe to "
                       "fine-tune without dropout (the export keeps the config's values)",
                       dir, ckpt::describe(dropout), jitter ? " (nor router jitter)" : ""));
  }

  template <typename T>
  void take_from_hf(const std::string& dir, const std::string& path, T& field, const T& value) {
    if (!passes_registry_check(dir, path, value)) return;
    if (set_at_.count(path) && field != value)
      report(where(path), path,
             fmt::format("{}, but {}/config.json says {}; leave it out of the recipe (model.init_from takes the "
                         "model's shape from config.json)",
                         field, dir, value));
    field = value;
  }

  template <typename E>
  void take_choice_from_hf(const std::string& dir, const std::string& path, E& field, E value) {
    if (!passes_registry_check(dir, path, value)) return;
    if (set_at_.count(path) && field != value)
      report(where(path), path,
             fmt::format("{}, but {}/config.json says {}; leave it out of the recipe (model.init_from takes the "
                         "model's shape from config.json)",
                         to_string(field), dir, to_string(value)));
    field = value;
  }

  void resolve_derived() {
    resolve_init_from();
    auto& m = recipe_.model;
    if (recipe_.run.dir.empty()) recipe_.run.dir = "runs/" + recipe_.name;
    if (m.num_kv_heads == 0) m.num_kv_heads = m.num_heads;
    if (m.max_seq_len == 0) m.max_seq_len = recipe_.data.seq_len;
    if (m.intermediate_size == 0) m.intermediate_size = (8 * m.hidden_size / 3 + 63) / 64 * 64;
    if (auto problem = text::check_tokenizer_spec(recipe_.data.tokenizer)) {
      report(where("data.tokenizer"), "data.tokenizer", *problem);
    } else {
      tokenizer_vocab_ = text::make_tokenizer(recipe_.data.tokenizer)->vocab_size();
      if (m.vocab_size == 0) m.vocab_size = tokenizer_vocab_;
    }
  }

  // The MoE keys agree with each other, with the family and with parallel.ep.
  void check_experts() {
    const auto& m = recipe_.model;
    const auto* spec = model::find_model_spec(m.family);
    if (!spec) return;  // reported by the option's check
    const int64_t ep = recipe_.parallel.ep;
    if (recipe_.parallel.intra_layer_micro_batch > 1 && ep == 1)
      report(where("parallel.intra_layer_micro_batch"), "parallel.intra_layer_micro_batch",
             fmt::format("{} overlaps the expert-parallel all-to-all, which needs parallel.ep above 1",
                         recipe_.parallel.intra_layer_micro_batch));
    if (ep > 1 && m.num_experts == 0)
      report(where("parallel.ep"), "parallel.ep",
             fmt::format("{}, but model.family {} has no experts to split; leave parallel.ep at 1", ep, m.family));
    if (ep > 1 && m.num_experts > 0 && m.num_experts % ep != 0)
      report(where("parallel.ep"), "parallel.ep",
             fmt::format("{} does not divide model.num_experts {}: each expert-parallel rank holds the same number "
                         "of experts",
                         ep, m.num_experts));
    if (spec->capabilities.experts && m.num_experts == 0)
      report(where("model.family"), "model.family",
             fmt::format("{} is a mixture of experts: set model.num_experts (and num_experts_per_tok, "
                         "moe_intermediate_size)",
                         m.family));
    if (!spec->capabilities.experts && m.num_experts > 0)
      report(where("model.num_experts"), "model.num_experts",
             fmt::format("{}, but model.family {} has no experts (a MoE family such as qwen3_moe has)", m.num_experts,
                         m.family));
    if (m.num_experts == 0) return;
    if (spec->check)
      for (const auto& [key, message] : spec->check(m)) report(where(key), key, message);
    if (m.num_experts_per_tok < 1 || m.num_experts_per_tok > m.num_experts)
      report(where("model.num_experts_per_tok"), "model.num_experts_per_tok",
             fmt::format("{} must be between 1 and model.num_experts {}", m.num_experts_per_tok, m.num_experts));
    if (m.moe_intermediate_size < 1)
      report(where("model.moe_intermediate_size"), "model.moe_intermediate_size",
             "must be set (the width of each expert) when model.num_experts is");
    if (m.n_group > 1 &&
        (m.num_experts % m.n_group != 0 || m.num_experts / m.n_group < 2 || m.router != model::Router::sigmoid_bias))
      report(where("model.n_group"), "model.n_group",
             fmt::format("{} groups need model.router sigmoid_bias and must split model.num_experts {} into groups of "
                         "2 or more",
                         m.n_group, m.num_experts));
    else if (m.n_group > 1 && (m.topk_group > m.n_group || m.num_experts_per_tok > m.topk_group * (m.num_experts / m.n_group)))
      report(where("model.topk_group"), "model.topk_group",
             fmt::format("{} of {} groups of {} experts cannot offer num_experts_per_tok {}", m.topk_group, m.n_group,
                         m.num_experts / m.n_group, m.num_experts_per_tok));
  }

  // The pipeline's stages and schedule fit the model and the batch.
  void check_pipeline_parallel() {
    const auto& m = recipe_.model;
    const auto& p = recipe_.parallel;
    const int64_t v = p.pp_virtual_stages;
    if (v > 1 && p.pp_schedule != PpSchedule::interleaved_1f1b)
      report(where("parallel.pp_virtual_stages"), "parallel.pp_virtual_stages",
             fmt::format("{} chunks per rank need parallel.pp_schedule interleaved_1f1b (it is {})", v,
                         to_string(p.pp_schedule)));
    if (p.pp <= 1) return;
    // Each stage runs its layers only: a balancing loss whose gradient in one layer needs every
    // layer's counts, or every data rank's, is not computed by any of them.
    if (m.num_experts > 0 && m.router_aux_loss_coef > 0 && m.router_aux_loss_scope == model::AuxLossScope::model)
      report(where("model.router_aux_loss_scope"), "model.router_aux_loss_scope",
             fmt::format("model balances over every layer's routing at once, which parallel.pp {} splits over its "
                         "stages: set model.router_aux_loss_scope layer (each layer's own balancing loss)",
                         p.pp));
    if (m.num_experts > 0 && m.router_aux_loss_coef > 0 && m.router_aux_loss_global_average)
      report(where("model.router_aux_loss_global_average"), "model.router_aux_loss_global_average",
             fmt::format("true defers the balancing loss to the end of the forward, which no stage of parallel.pp {} "
                         "runs whole: set it false (each micro batch's counts)",
                         p.pp));
    if (const auto* spec = model::find_model_spec(m.family); spec && !spec->capabilities.pipeline)
      report(where("parallel.pp"), "parallel.pp",
             fmt::format("{}: model.family {} is not split into pipeline stages: leave it at 1 (use FSDP)", p.pp,
                         m.family));
    if (p.pp_schedule == PpSchedule::interleaved_1f1b && v < 2)
      report(where("parallel.pp_virtual_stages"), "parallel.pp_virtual_stages",
             "interleaved_1f1b needs at least 2 chunks per rank");
    const int64_t chunks = p.pp * v;
    if (m.num_layers + 2 < chunks)
      report(where("parallel.pp"), "parallel.pp",
             fmt::format("{} x {} chunks for {} layers and the embedding and head: each chunk needs one of them",
                         p.pp, v, m.num_layers));
  }

  // The model's shape splits over parallel.tp (model/layers/tensor_parallel_ops.h).
  void check_tensor_parallel() {
    const auto& m = recipe_.model;
    const auto& p = recipe_.parallel;
    const int64_t tp = p.tp;
    if (p.sequence_parallel && tp == 1)
      report(where("parallel.sequence_parallel"), "parallel.sequence_parallel",
             "true splits activations over the tensor-parallel ranks, which needs parallel.tp above 1");
    if (tp <= 1) return;
    if (const auto* spec = model::find_model_spec(m.family); spec && !spec->capabilities.tensor_parallel)
      report(where("parallel.tp"), "parallel.tp",
             fmt::format("{}: model.family {} is not split by tensor parallelism: leave it at 1 (use FSDP)", tp,
                         m.family));
    if (m.num_heads % tp != 0)
      report(where("parallel.tp"), "parallel.tp",
             fmt::format("{} does not divide model.num_heads {}: each tensor-parallel rank computes whole heads", tp,
                         m.num_heads));
    else if (m.num_kv_heads > 0 && m.num_kv_heads % tp != 0 && tp % m.num_kv_heads != 0)
      report(where("parallel.tp"), "parallel.tp",
             fmt::format("{} and model.num_kv_heads {}: kv heads are split when tp divides them and replicated when "
                         "they divide tp; neither holds",
                         tp, m.num_kv_heads));
    if (m.num_moe_layers() < m.num_layers && m.intermediate_size % tp != 0)
      report(where("parallel.tp"), "parallel.tp",
             fmt::format("{} does not divide model.intermediate_size {}", tp, m.intermediate_size));
    check_tensor_parallel_experts();
    if (m.vocab_size > 0 && m.vocab_size < tp)
      report(where("parallel.tp"), "parallel.tp",
             fmt::format("{} is more than the {} rows of the vocabulary", tp, m.vocab_size));
    if (p.sequence_parallel && recipe_.data.seq_len % tp != 0)
      report(where("parallel.sequence_parallel"), "parallel.sequence_parallel",
             fmt::format("true splits each sequence over parallel.tp {} ranks, which does not divide data.seq_len {}",
                         tp, recipe_.data.seq_len));
  }

  // Tensor parallelism splits a MoE layer's experts by expert over tp, and ep splits each tp
  // rank's further (model/layers/moe.h); shared experts split as the dense MLP.
  void check_tensor_parallel_experts() {
    const auto& m = recipe_.model;
    const auto& p = recipe_.parallel;
    if (m.num_experts == 0) return;
    if (m.num_experts % (p.tp * p.ep) != 0)
      report(where("parallel.tp"), "parallel.tp",
             p.ep > 1 ? fmt::format("{} x parallel.ep {} does not divide model.num_experts {}: each tensor- and "
                                    "expert-parallel rank holds the same number of experts",
                                    p.tp, p.ep, m.num_experts)
                      : fmt::format("{} does not divide model.num_experts {}: each tensor-parallel rank holds the same "
                                    "number of experts",
                                    p.tp, m.num_experts));
    if (m.num_shared_experts > 0 && (m.moe_intermediate_size * m.num_shared_experts) % p.tp != 0)
      report(where("parallel.tp"), "parallel.tp",
             fmt::format("{} does not divide the shared experts' width, model.moe_intermediate_size {} x "
                         "num_shared_experts {}",
                         p.tp, m.moe_intermediate_size, m.num_shared_experts));
  }

  // Each rank's part of a row, and for Ulysses its heads, come out whole.
  void check_multi_token_prediction() {
    const auto& m = recipe_.model;
    const auto& p = recipe_.parallel;
    if (m.mtp_layers == 0) return;
    if (const auto* spec = model::find_model_spec(m.family); spec && !spec->capabilities.multi_token_prediction)
      report(where("model.mtp_layers"), "model.mtp_layers",
             fmt::format("{}: model.family {} has no multi-token prediction (deepseek_v3 has); leave it at 0",
                         m.mtp_layers, m.family));
    for (const auto& [key, degree] : {std::pair<const char*, int64_t>{"parallel.pp", p.pp}, {"parallel.tp", p.tp},
                                      {"parallel.cp", p.cp}})
      if (degree > 1)
        report(where("model.mtp_layers"), "model.mtp_layers",
               fmt::format("{} with {} {}: multi-token prediction runs under fsdp, dp and ep only for now; leave "
                           "{} at 1, or mtp_layers at 0",
                           m.mtp_layers, key, degree, key));
  }

  void check_float8() {
    const auto& m = recipe_.model;
    const auto& f = recipe_.precision;
    if (f.fp8_all_gather == Float8AllGather::on && model::is_rowwise(f.fp8))
      report(where("precision.fp8_all_gather"), "precision.fp8_all_gather",
             fmt::format("on with precision.fp8 {}: a rowwise weight is quantized per output row for the forward "
                         "and again for the input gradient, so no one fp8 copy serves both; use tensorwise or "
                         "blockwise, or fp8_all_gather auto",
                         to_string(f.fp8)));
    if (f.fp8 == model::Float8Scaling::off) return;
    if (recipe_.train.dtype == Dtype::fp16)
      report(where("precision.fp8"), "precision.fp8",
             fmt::format("{} with train.dtype fp16: FP8 scales every operand from its own amax, and fp16's loss "
                         "scaling would rescale the gradients it quantizes; use train.dtype bf16 (or fp32)",
                         to_string(f.fp8)));
    const int64_t tp = recipe_.parallel.tp;
    if (f.fp8 != model::Float8Scaling::blockwise || tp <= 1) return;
    // Each tensor-parallel part must hold whole 128 x 128 blocks of the whole weight, or its
    // blocks, and so its scales, would not be the one-process run's.
    const int64_t attention_width = m.num_heads * m.head_dim();
    for (const auto& [name, width] : {std::pair<const char*, int64_t>{"model.num_heads x head_dim", attention_width},
                                      {"model.intermediate_size", m.intermediate_size}})
      if (width > 0 && (width % tp != 0 || (width / tp) % model::kFloat8BlockEdge != 0))
        report(where("precision.fp8"), "precision.fp8",
               fmt::format("blockwise with parallel.tp {}: {} = {} splits into parts of {} columns, not whole "
                           "{}-wide blocks; use tensorwise or rowwise, or a tp whose parts are multiples of {}",
                           tp, name, width, width / tp, model::kFloat8BlockEdge, model::kFloat8BlockEdge));
  }

  void check_context_parallel() {
    const auto& m = recipe_.model;
    const auto& p = recipe_.parallel;
    const int64_t cp = p.cp, seq = recipe_.data.seq_len;
    if (cp <= 1) return;
    if (const auto* spec = model::find_model_spec(m.family); spec && !spec->capabilities.context_parallel)
      report(where("parallel.cp"), "parallel.cp",
             fmt::format("{}: model.family {} does not split its sequences over ranks: leave it at 1", cp, m.family));
    if (p.pp > 1)
      report(where("parallel.cp"), "parallel.cp",
             fmt::format("{} with parallel.pp {}: context parallelism does not run inside pipeline stages yet; use "
                         "fsdp, tp or ep beside it",
                         cp, p.pp));
    if (seq % (2 * cp) != 0)
      report(where("parallel.cp"), "parallel.cp",
             fmt::format("{} cuts each sequence into 2 x cp = {} chunks (head-tail), which does not divide "
                         "data.seq_len {}: make data.seq_len a multiple of {}",
                         cp, 2 * cp, seq, 2 * cp));
    else if (p.sequence_parallel && (seq / cp) % p.tp != 0)
      report(where("parallel.sequence_parallel"), "parallel.sequence_parallel",
             fmt::format("true splits each cp rank's {} tokens of a sequence over parallel.tp {}, which does not "
                         "divide them",
                         seq / cp, p.tp));
    const int64_t kv = m.num_kv_heads > 0 ? m.num_kv_heads : m.num_heads;
    if (p.cp_kind == parallel::ContextKind::ulysses && p.tp > 0 && m.num_heads % p.tp == 0 &&
        ((m.num_heads / p.tp) % cp != 0 || kv % p.tp != 0 || (kv / p.tp) % cp != 0))
      report(where("parallel.cp_kind"), "parallel.cp_kind",
             fmt::format("ulysses splits the heads over parallel.cp {}: model.num_heads {} and num_kv_heads {}{} must "
                         "divide by it; set parallel.cp_kind ring, or a cp that divides the heads",
                         cp, m.num_heads, kv, p.tp > 1 ? fmt::format(" per tensor-parallel rank (tp {})", p.tp) : ""));
  }

  // model.freeze names parts of the family, and leaves one to train.
  // 1-bit Adam compresses what the data-parallel replicas exchange; the layouts it is exact on.
  void check_onebit_adam() {
    if (recipe_.optim.name != Optimizer::onebit_adam) return;
    const auto& p = recipe_.parallel;
    if (p.dp == 1)
      report(where("parallel.dp"), "parallel.dp",
             "1: optim.name onebit_adam compresses the momentum exchanged between data-parallel replicas, and there "
             "is one. Pure FSDP's reduce-scatter already moves each gradient element once and its optimizer state is "
             "sharded, so there is nothing to replace: use parallel.dp above 1 (DDP, or HSDP with parallel.fsdp)");
    for (const auto& [key, degree, why] :
         {std::tuple<const char*, int64_t, const char*>{"parallel.tp", p.tp, "tensor-parallel slices"},
          {"parallel.pp", p.pp, "pipeline stages (and a tied table's copies)"},
          {"parallel.cp", p.cp, "context-parallel ranks, whose gradients reduce inside the shard group"},
          {"parallel.ep", p.ep, "expert units, which reduce over groups of their own"}})
      if (degree > 1)
        report(where(key), key,
               fmt::format("{}: optim.name onebit_adam is defined over the replicas of DDP and HSDP only, not over {}; "
                           "leave it at 1 or use optim.name adamw",
                           degree, why));
  }

  void check_freeze() {
    const auto* spec = model::find_model_spec(recipe_.model.family);
    if (!spec) return;
    std::vector<std::string> parts;
    for (const auto& part : spec->parts) parts.push_back(part.first);
    for (const auto& name : recipe_.model.freeze) {
      if (std::find(parts.begin(), parts.end(), name) != parts.end()) continue;
      report(where("model.freeze"), "model.freeze",
             parts.empty() ? fmt::format("'{}': model.family {} is one part and cannot freeze any of it", name,
                                         recipe_.model.family)
                           : fmt::format("'{}' is not a part of model.family {}; its parts are {}", name,
                                         recipe_.model.family, fmt::join(parts, ", ")));
    }
    if (!parts.empty() && std::all_of(parts.begin(), parts.end(), [&](const std::string& part) {
          const auto& freeze = recipe_.model.freeze;
          return std::find(freeze.begin(), freeze.end(), part) != freeze.end();
        }))
      report(where("model.freeze"), "model.freeze", "every part is frozen, so nothing would train: leave one out");
  }

  // Encoders learn masked tokens, decoders the next one.
  void check_objective() {
    const auto* spec = model::find_model_spec(recipe_.model.family);
    const bool encoder = spec && !spec->capabilities.causal;
    const auto& objective = recipe_.data.objective;
    if (objective == Objective::mlm && !encoder) {
      std::vector<std::string> encoders;
      for (const auto& other : model::model_specs())
        if (!other.capabilities.causal) encoders.push_back(other.family);
      report(where("data.objective"), "data.objective",
             fmt::format("mlm trains an encoder, and model.family {} is a decoder: set model.family {}, or "
                         "data.objective clm",
                         recipe_.model.family, fmt::join(encoders, " or ")));
    }
    if (encoder && objective != Objective::mlm)
      report(where("model.family"), "model.family",
             fmt::format("{} is an encoder trained on masked tokens: set data.objective mlm", recipe_.model.family));
  }

  void check_consistency() {
    const auto& m = recipe_.model;
    if (m.latent.enabled())
      ;  // latent attention's heads have sizes of their own (checked by the family's spec)
    else if (m.head_dim_override == 0 && m.hidden_size % m.num_heads != 0)
      report(where("model.num_heads"), "model.num_heads",
             fmt::format("{} heads do not divide hidden_size {} (hidden_size must be a multiple of num_heads)",
                         m.num_heads, m.hidden_size));
    else if (m.head_dim() % 2 != 0)
      report(where(m.head_dim_override > 0 ? "model.head_dim" : "model.num_heads"),
             m.head_dim_override > 0 ? "model.head_dim" : "model.num_heads",
             fmt::format("head size {} = {} must be even for rotary embeddings",
                         m.head_dim_override > 0 ? "head_dim" : "hidden_size/num_heads", m.head_dim()));
    if (m.num_kv_heads > 0 && m.num_heads % m.num_kv_heads != 0)
      report(where("model.num_kv_heads"), "model.num_kv_heads",
             fmt::format("{} kv heads do not divide num_heads {} (each kv head serves a whole group of query heads)",
                         m.num_kv_heads, m.num_heads));
    check_experts();
    check_tensor_parallel();
    check_pipeline_parallel();
    check_context_parallel();
    check_multi_token_prediction();
    check_float8();
    check_freeze();
    check_onebit_adam();
    check_objective();
    if (const auto* spec = model::find_model_spec(m.family);
        spec && spec->capabilities.pad_token && m.vocab_size > 0 && m.pad_token_id >= m.vocab_size)
      report(where("model.pad_token_id"), "model.pad_token_id",
             fmt::format("{} is not an id of the vocabulary of {} (model.vocab_size){}", m.pad_token_id, m.vocab_size,
                         m.init_from.empty() ? "" : fmt::format("; it comes from {}/config.json",
                                                                m.init_from.substr(3))));
    if (tokenizer_vocab_ > 0 && m.vocab_size < tokenizer_vocab_)
      report(where("model.vocab_size"), "model.vocab_size",
             fmt::format("{} is smaller than the {} ids of tokenizer '{}'", m.vocab_size,
                         tokenizer_vocab_, recipe_.data.tokenizer));
    if (m.rope_scaling.yarn() && m.rope_scaling.beta_fast <= m.rope_scaling.beta_slow)
      report(where("model.rope_beta_fast"), "model.rope_beta_fast",
             fmt::format("{} must be above model.rope_beta_slow {}", m.rope_scaling.beta_fast, m.rope_scaling.beta_slow));
    if (m.rope_scaling.enabled() && !m.rope_scaling.yarn() &&
        m.rope_scaling.high_freq_factor <= m.rope_scaling.low_freq_factor)
      report(where("model.rope_high_freq_factor"), "model.rope_high_freq_factor",
             fmt::format("{} must be above model.rope_low_freq_factor {}", m.rope_scaling.high_freq_factor,
                         m.rope_scaling.low_freq_factor));
    if (m.max_seq_len < recipe_.data.seq_len)
      report(where("model.max_seq_len"), "model.max_seq_len",
             fmt::format("{} is shorter than data.seq_len {}", m.max_seq_len, recipe_.data.seq_len));
    const auto& t = recipe_.train;
    if (t.global_batch_size % t.micro_batch_size != 0)
      report(where("train.global_batch_size"), "train.global_batch_size",
             fmt::format("{} is not a multiple of train.micro_batch_size {} (global batch = micro batch x accumulation steps x data-parallel ranks)",
                         t.global_batch_size, t.micro_batch_size));
    else
      check_batch_geometry();
    if (recipe_.memory.offload_activations && recipe_.memory.recompute != memory::Recompute::full)
      report(where("memory.offload_activations"), "memory.offload_activations",
             fmt::format("needs memory.recompute: full (it offloads the block inputs that recompute keeps), got '{}'",
                         to_string(recipe_.memory.recompute)));
    const auto& o = recipe_.optim;
    if (o.min_lr > o.lr)
      report(where("optim.min_lr"), "optim.min_lr",
             fmt::format("{} is above optim.lr {}", o.min_lr, o.lr));
    // optim.warmup_steps above train.steps is allowed (a smoke run of a real recipe: --set
    // train.steps=6): the schedule is the recipe's, cut short, and the trainer warns
    // (optim::LrSchedule::warmup_warning), as Megatron and torchtitan let warmup run past the end.
  }

  // When the recipe fixes the data-parallel ranks (parallel.dp and parallel.fsdp), the batch
  // geometry is known before any rank starts; otherwise the trainer checks it.
  void check_batch_geometry() {
    const auto& p = recipe_.parallel;
    const auto& t = recipe_.train;
    if (p.dp <= 0 || p.fsdp <= 0) return;
    if (auto problem = batch_geometry_problem(t.global_batch_size, t.micro_batch_size, p.dp * p.fsdp))
      report(where("train.global_batch_size"), "train.global_batch_size", *problem);
  }

  void check_files() {
    if (auto problem = data::check_source(recipe_.data.train))
      report(where("data.train"), "data.train", *problem);
    if (!recipe_.data.eval.empty())
      if (auto problem = data::check_source(recipe_.data.eval))
        report(where("data.eval"), "data.eval", *problem);
    const auto& resume = recipe_.checkpoint.resume;
    if (resume.kind == ResumeKind::folder && !std::filesystem::is_directory(resume.folder))
      report(where("checkpoint.resume"), "checkpoint.resume",
             fmt::format("checkpoint folder not found: {} (use auto, strict, never, or a checkpoint folder)",
                         resume.folder));
  }

  std::string file_;
  const LoadOptions& options_;
  const OptionRegistry& registry_;
  Recipe recipe_;
  std::map<std::string, std::string> set_at_;
  std::vector<Diagnostic> diagnostics_;
  int64_t tokenizer_vocab_ = 0;
  // model.init_from: the folder's config.json while its values are taken, a recipe the registry's
  // checks write into, and whether one of the values was refused.
  const nlohmann::json* hf_json_ = nullptr;
  Recipe checked_;
  bool hf_refused_ = false;
};

}  // namespace

RecipeError::RecipeError(std::vector<Diagnostic> diagnostics)
    : InputError(join_diagnostics(diagnostics)), diagnostics_(std::move(diagnostics)) {}

Recipe load_recipe_text(const std::string& text, const std::string& display_name,
                        const LoadOptions& options) {
  return RecipeBuilder(display_name, options).build(text);
}

Recipe load_recipe(const std::string& path, const LoadOptions& options) {
  // A recipe is settings, not data: parsing YAML takes ~200 bytes of memory per value, so a file
  // of tens of MB (a data file passed by mistake) would take gigabytes.
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (!error && size > kMaxRecipeBytes)
    throw RecipeError({{path, "",
                        fmt::format("the file is {:.1f} MB; recipes are limited to {} MB (is it a data file? name "
                                    "data files in data.train)",
                                    static_cast<double>(size) / 1e6, kMaxRecipeBytes / 1000000)}});
  std::string text;
  try {
    text = util::read_file(path);
  } catch (const InputError& e) {
    throw RecipeError({{path, "", "cannot read the recipe (check the path)"}});
  }
  return load_recipe_text(text, path, options);
}

int64_t health_interval(const std::string& value) {
  if (value == "off") return -1;
  if (value == "start") return 0;
  static const std::string prefix = "every_";
  if (value.rfind(prefix, 0) != 0 || value.size() == prefix.size()) return -2;
  const auto digits = value.substr(prefix.size());
  if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) return -2;
  const int64_t n = std::stoll(digits);
  return n >= 1 ? n : -2;
}

std::string dump_recipe(const Recipe& recipe) {
  std::string text;
  std::string section;
  for (const auto& option : OptionRegistry::instance().options()) {
    auto dot = option.path.find('.');
    std::string option_section = dot == std::string::npos ? "" : option.path.substr(0, dot);
    if (option_section != section && !option_section.empty()) text += option_section + ":\n";
    section = option_section;
    std::string leaf = dot == std::string::npos ? option.path : option.path.substr(dot + 1);
    text += fmt::format("{}{}: {}\n", section.empty() ? "" : "  ", leaf, option.render(recipe));
  }
  return text;
}

std::string options_markdown() {
  std::string text = "| key | type | default | meaning |\n|---|---|---|---|\n";
  for (const auto& option : OptionRegistry::instance().options()) {
    std::string default_text = option.required ? "required" : "`" + option.default_text + "`";
    text += fmt::format("| `{}` | {} | {} | {} |\n", option.path, value_type_name(option.type),
                        default_text, option.doc);
  }
  return text;
}

}  // namespace xtrain::config

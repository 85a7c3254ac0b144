#include "model/spec/llama_family.h"

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/spec/hf_fields.h"
#include "util/input_error.h"

namespace xtrain::model {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() > suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

nlohmann::json hf_rope_scaling(const RopeScaling& s) {
  if (!s.enabled()) return nullptr;
  nlohmann::json json = {{"rope_type", to_string(s.type)},
                         {"factor", s.factor},
                         {"original_max_position_embeddings", s.original_max_len}};
  if (s.type == RopeScalingType::llama3) {
    json["low_freq_factor"] = s.low_freq_factor;
    json["high_freq_factor"] = s.high_freq_factor;
    return json;
  }
  json["beta_fast"] = s.beta_fast;
  json["beta_slow"] = s.beta_slow;
  json["truncate"] = s.truncate;
  if (s.attention_factor > 0) json["attention_factor"] = s.attention_factor;
  if (s.mscale > 0) json["mscale"] = s.mscale;
  if (s.mscale_all_dim > 0) json["mscale_all_dim"] = s.mscale_all_dim;
  return json;
}

namespace {
double rope_number(const nlohmann::json& object, const char* name, double fallback, const std::string& source) {
  if (!object.contains(name) || object.at(name).is_null()) return fallback;
  if (!object.at(name).is_number())
    throw InputError(fmt::format("{}: rope field \"{}\" must be a number", source, name));
  return HfFields::number_of(object.at(name), source, name);
}

// A length the config may write as 8192 or 8192.0; anything else (a fraction, 1e300) is refused
// rather than cast.
int64_t rope_length(const nlohmann::json& object, const char* name, int64_t fallback, const std::string& source) {
  const double value = rope_number(object, name, static_cast<double>(fallback), source);
  if (value != std::floor(value) || std::fabs(value) > 9.0e15)
    throw InputError(fmt::format("{}: rope field \"{}\" must be a whole number of positions, got {}", source, name,
                                 object.at(name).dump()));
  return static_cast<int64_t>(value);
}

void read_llama3_rope(const nlohmann::json& rope, const std::string& source, RopeScaling& s) {
  for (const char* name : {"factor", "original_max_position_embeddings"})
    if (!rope.contains(name)) throw InputError(fmt::format("{}: llama3 rope scaling without \"{}\"", source, name));
  s.factor = rope_number(rope, "factor", 0, source);
  s.low_freq_factor = rope_number(rope, "low_freq_factor", 1.0, source);
  s.high_freq_factor = rope_number(rope, "high_freq_factor", 4.0, source);
  s.original_max_len = rope_length(rope, "original_max_position_embeddings", 8192, source);
  if (s.factor <= 0 || s.high_freq_factor <= s.low_freq_factor)
    throw InputError(fmt::format("{}: llama3 rope scaling {} needs factor > 0 and high_freq_factor > low_freq_factor",
                                 source, rope.dump()));
}

// transformers' _compute_yarn_parameters; a missing original_max_position_embeddings is the
// model's max_position_embeddings, as transformers' standardize_rope_params sets it.
void read_yarn_rope(const nlohmann::json& rope, const std::string& source, int64_t max_positions, RopeScaling& s) {
  s.type = RopeScalingType::yarn;
  s.original_max_len = rope_length(rope, "original_max_position_embeddings", max_positions, source);
  if (s.original_max_len <= 0)
    throw InputError(fmt::format("{}: yarn rope scaling {} needs original_max_position_embeddings > 0", source,
                                 rope.dump()));
  s.factor = rope_number(rope, "factor", double(max_positions) / double(s.original_max_len), source);
  s.beta_fast = rope_number(rope, "beta_fast", 32, source);
  s.beta_slow = rope_number(rope, "beta_slow", 1, source);
  s.mscale = rope_number(rope, "mscale", 0, source);
  s.mscale_all_dim = rope_number(rope, "mscale_all_dim", 0, source);
  s.attention_factor = rope_number(rope, "attention_factor", 0, source);
  if (rope.contains("truncate") && rope.at("truncate").is_boolean()) s.truncate = rope.at("truncate").get<bool>();
  if (s.factor <= 0 || s.beta_fast <= s.beta_slow)
    throw InputError(fmt::format("{}: yarn rope scaling {} needs factor > 0, original_max_position_embeddings > 0 and "
                                 "beta_fast > beta_slow",
                                 source, rope.dump()));
}

// The rotary base and scaling that one rope object (or none) of config.json gives.
void read_rope_object(const nlohmann::json& json, const nlohmann::json* rope, const std::string& source,
                      ModelConfig& c) {
  c.rope_theta = rope_number(json, "rope_theta", 10000.0, source);
  if (!rope) return;
  c.rope_theta = rope_number(*rope, "rope_theta", c.rope_theta, source);
  const auto type_field = rope->contains("rope_type") ? "rope_type" : "type";
  const std::string type = HfFields(*rope, source).text(type_field, "default");
  if (type == "default") return;
  if (type == "llama3") return read_llama3_rope(*rope, source, c.rope_scaling);
  if (type == "yarn") return read_yarn_rope(*rope, source, c.max_seq_len, c.rope_scaling);
  throw InputError(fmt::format("{}: rope type \"{}\" ({}); xtrain computes the default rotary embedding, llama3's "
                               "scaling and yarn (a model trained with another would compute other logits here)",
                               source, type, rope->dump()));
}

bool same_rope(const ModelConfig& a, const ModelConfig& b) {
  const auto fields = [](const ModelConfig& c) {
    const auto& s = c.rope_scaling;
    return std::make_tuple(c.rope_theta, s.type, s.factor, s.low_freq_factor, s.high_freq_factor, s.original_max_len,
                           s.beta_fast, s.beta_slow, s.mscale, s.mscale_all_dim, s.attention_factor, s.truncate);
  };
  return fields(a) == fields(b);
}
}  // namespace

// transformers 5 reads rope_scaling over rope_parameters when config.json holds both
// (PreTrainedConfig.convert_rope_params_to_dict); an empty object or null counts as absent. Two
// that compute the same rotary embedding are accepted; two that differ are refused, since the one
// meant cannot be known.
void read_hf_rope(const nlohmann::json& json, const std::string& source, ModelConfig& c) {
  const auto present = [&](const char* key) -> const nlohmann::json* {
    if (!json.contains(key) || json.at(key).is_null() || (json.at(key).is_object() && json.at(key).empty()))
      return nullptr;
    if (!json.at(key).is_object())
      throw InputError(fmt::format("{}: field \"{}\" must be an object (rope_type, factor, ...), got {}", source, key,
                                   json.at(key).dump()));
    return &json.at(key);
  };
  const nlohmann::json* parameters = present("rope_parameters");
  const nlohmann::json* scaling = present("rope_scaling");
  if (!scaling || !parameters) return read_rope_object(json, scaling ? scaling : parameters, source, c);
  // Each read on its own; one xtrain cannot compute differs from one it can.
  ModelConfig from_parameters = c, from_scaling = c;
  std::string parameters_problem, scaling_problem;
  try {
    read_rope_object(json, parameters, source, from_parameters);
  } catch (const InputError& e) {
    parameters_problem = e.what();
  }
  try {
    read_rope_object(json, scaling, source, from_scaling);
  } catch (const InputError& e) {
    scaling_problem = e.what();
  }
  if (!scaling_problem.empty() && !parameters_problem.empty()) throw InputError(scaling_problem);
  if (scaling_problem.empty() && parameters_problem.empty() && same_rope(from_parameters, from_scaling)) {
    c = from_scaling;
    return;
  }
  throw InputError(fmt::format("{}: rope_parameters {} and rope_scaling {} give different rotary embeddings, and "
                               "which was meant cannot be told (transformers takes rope_scaling when both are there); "
                               "keep one of the two keys in config.json",
                                 source, parameters->dump(), scaling->dump()));
}

namespace {

// What transformers' MoE blocks do not compute: kept in config.json, so that export can say so.
void note_unexported(const ModelConfig& c, nlohmann::json& json) {
  std::vector<std::string> unexported;
  if (c.router != Router::softmax)
    unexported.push_back(std::string("model.router ") + to_string(c.router) + " (and its expert bias)");
  if (c.num_shared_experts > 0) unexported.push_back("model.num_shared_experts");
  if (c.routed_scaling_factor != 1.0) unexported.push_back("model.routed_scaling_factor");
  if (c.capacity_factor > 0) unexported.push_back("model.capacity_factor (transformers is dropless)");
  if (!unexported.empty()) json["xtrain_unexported"] = unexported;
}

// transformers' Qwen3-MoE fields. Its load-balancing loss is top_k times xtrain's, and counts only
// with output_router_logits, which stays off as transformers writes it.
void add_experts(const ModelConfig& c, nlohmann::json& json) {
  std::vector<int64_t> dense_layers;
  for (int64_t i = 0; i < c.first_k_dense; ++i) dense_layers.push_back(i);
  json["num_experts"] = c.num_experts;
  json["num_experts_per_tok"] = c.num_experts_per_tok;
  json["moe_intermediate_size"] = c.moe_intermediate_size;
  json["norm_topk_prob"] = c.norm_topk_prob;
  json["decoder_sparse_step"] = c.moe_layer_step;
  json["mlp_only_layers"] = dense_layers;
  json["router_aux_loss_coef"] = c.router_aux_loss_coef / static_cast<double>(c.num_experts_per_tok);
  json["output_router_logits"] = false;
  json["use_sliding_window"] = false;
  note_unexported(c, json);
}

// Mixtral's fields: every layer a mixture of experts, of width intermediate_size, the top-k
// weights renormalised.
void add_mixtral_experts(const ModelConfig& c, nlohmann::json& json) {
  json["num_local_experts"] = c.num_experts;
  json["num_experts_per_tok"] = c.num_experts_per_tok;
  json["intermediate_size"] = c.moe_intermediate_size;
  json["router_aux_loss_coef"] = c.router_aux_loss_coef / static_cast<double>(c.num_experts_per_tok);
  json["output_router_logits"] = false;
  json["router_jitter_noise"] = 0.0;
  json["sliding_window"] = nullptr;
  json.erase("attention_bias");
  json.erase("mlp_bias");
  note_unexported(c, json);
}

// The load-balancing coefficient, in xtrain's terms (router_aux_loss_coef_from_hf); transformers'
// classes default it to 0.001 where config.json leaves it out.
void read_router_aux_loss_coef(const nlohmann::json& json, const std::string& source, ModelConfig& c) {
  double coef = 0.001;
  if (json.contains("router_aux_loss_coef")) {
    if (!json.at("router_aux_loss_coef").is_number())
      throw InputError(fmt::format("{}: field \"router_aux_loss_coef\" must be a number", source));
    coef = HfFields::number_of(json.at("router_aux_loss_coef"), source, "router_aux_loss_coef");
  }
  if (coef < 0) throw InputError(fmt::format("{}: router_aux_loss_coef {} is negative", source, coef));
  c.router_aux_loss_coef = router_aux_loss_coef_from_hf(coef, c.num_experts_per_tok);
}

void read_mixtral_experts(const nlohmann::json& json, const std::string& source, ModelConfig& c) {
  auto integer = [&](const char* name) {
    if (!json.contains(name)) throw InputError(fmt::format("{}: field \"{}\" must be an integer", source, name));
    return HfFields::integer_of(json.at(name), source, name);
  };
  c.num_experts = integer("num_local_experts");
  c.num_experts_per_tok = integer("num_experts_per_tok");
  c.moe_intermediate_size = c.intermediate_size;
  if (c.num_experts < 1 || c.num_experts_per_tok < 1 || c.num_experts_per_tok > c.num_experts)
    throw InputError(fmt::format("{}: inconsistent experts (num_local_experts {}, num_experts_per_tok {})", source,
                                 c.num_experts, c.num_experts_per_tok));
  if (json.contains("sliding_window") && !json.at("sliding_window").is_null())
    throw InputError(fmt::format("{}: sliding_window is {}; xtrain's mixtral attends to the whole sequence", source,
                                 json.at("sliding_window").dump()));
  read_router_aux_loss_coef(json, source, c);
}

// The experts' fields of a Qwen3-MoE config.json; mlp_only_layers must be the first layers.
void read_experts(const nlohmann::json& json, const std::string& source, ModelConfig& c) {
  auto integer = [&](const char* name, int64_t fallback) {
    if (!json.contains(name)) return fallback;
    return HfFields::integer_of(json.at(name), source, name);
  };
  // The Hub's files say num_experts; transformers 5 writes num_local_experts.
  c.num_experts = integer("num_experts", integer("num_local_experts", 0));
  c.num_experts_per_tok = integer("num_experts_per_tok", 0);
  c.moe_intermediate_size = integer("moe_intermediate_size", 0);
  c.moe_layer_step = integer("decoder_sparse_step", 1);
  c.norm_topk_prob = HfFields(json, source).boolean("norm_topk_prob", true);
  if (c.num_experts < 1 || c.num_experts_per_tok < 1 || c.num_experts_per_tok > c.num_experts ||
      c.moe_intermediate_size < 1 || c.moe_layer_step < 1)
    throw InputError(fmt::format("{}: inconsistent experts (num_experts {}, num_experts_per_tok {}, "
                                 "moe_intermediate_size {}, decoder_sparse_step {})",
                                 source, c.num_experts, c.num_experts_per_tok, c.moe_intermediate_size,
                                 c.moe_layer_step));
  auto dense = json.value("mlp_only_layers", nlohmann::json::array());
  if (dense.is_null()) dense = nlohmann::json::array();
  if (!dense.is_array())
    throw InputError(fmt::format("{}: field \"mlp_only_layers\" must be a list of layers, got {}", source, dense.dump()));
  for (size_t i = 0; i < dense.size(); ++i)
    if (!dense[i].is_number_integer() || dense[i].get<int64_t>() != static_cast<int64_t>(i))
      throw InputError(fmt::format("{}: mlp_only_layers {} are not the first layers 0..k-1, the dense layers xtrain "
                                   "places (model.first_k_dense)",
                                   source, dense.dump()));
  c.first_k_dense = static_cast<int64_t>(dense.size());
  read_router_aux_loss_coef(json, source, c);
}

// How a family of the Llama decoder writes its experts in config.json and its checkpoints.
enum class Experts {
  none,       // dense
  qwen3_moe,  // num_experts, moe_intermediate_size, mlp_only_layers; experts under mlp.experts.N
  mixtral,    // num_local_experts, every layer; experts under block_sparse_moe.experts.N (w1, w3, w2)
};

// config.json of the families: Llama's fields, and what each family adds.
nlohmann::json hf_config(const ModelSpec& spec, const AttentionFeatures& features, Experts experts,
                         const ModelConfig& c, int64_t eos_token_id) {
  nlohmann::json json = {
      {"architectures", {spec.hf_architecture}},
      {"model_type", spec.hf_model_type},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_heads},
      {"num_key_value_heads", c.num_kv_heads},
      {"head_dim", c.head_dim()},
      {"max_position_embeddings", c.max_seq_len},
      {"rope_theta", c.rope_theta},
      {"rope_scaling", hf_rope_scaling(c.rope_scaling)},
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
  if (features.qkv_bias) {
    json.erase("attention_bias");
    json.erase("mlp_bias");
    json["use_sliding_window"] = false;
  }
  if (experts == Experts::mixtral)
    add_mixtral_experts(c, json);
  else if (experts == Experts::qwen3_moe)
    add_experts(c, json);
  return json;
}

// Reads HF fields; a feature the layers do not compute (a rope type other than default and
// llama3, biases the family lacks, another activation, sliding-window layers) is refused: a
// model that loaded but computed something else would be worse.
ModelConfig config_from_hf(const ModelSpec& spec, const AttentionFeatures& features, Experts experts,
                           const nlohmann::json& json, const std::string& source) {
  auto field = [&](const char* name) -> const nlohmann::json& {
    if (!json.contains(name)) throw InputError(fmt::format("{}: missing field \"{}\"", source, name));
    return json.at(name);
  };
  auto integer = [&](const char* name) { return HfFields::integer_of(field(name), source, name); };
  const HfFields f(json, source);
  auto number = [&](const char* name, double fallback) {
    if (!json.contains(name)) return fallback;
    return HfFields::number_of(json.at(name), source, name);
  };
  ModelConfig c;
  c.family = spec.family;
  c.vocab_size = integer("vocab_size");
  c.hidden_size = integer("hidden_size");
  c.intermediate_size = integer("intermediate_size");
  c.num_layers = integer("num_hidden_layers");
  c.num_heads = integer("num_attention_heads");
  c.num_kv_heads = json.contains("num_key_value_heads") ? integer("num_key_value_heads") : c.num_heads;
  c.max_seq_len = integer("max_position_embeddings");
  read_hf_rope(json, source, c);
  c.norm_eps = number("rms_norm_eps", 1e-6);
  c.init_std = number("initializer_range", 0.02);
  c.tie_embeddings = f.boolean("tie_word_embeddings", false);
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
  if (f.text("hidden_act", "silu") != "silu")
    throw InputError(fmt::format("{}: hidden_act \"{}\"; xtrain's MLP is SwiGLU (silu)", source,
                                 f.text("hidden_act", "")));
  if (!features.qkv_bias && f.boolean("attention_bias", false))
    throw InputError(fmt::format("{}: attention_bias is true; xtrain's {} has no attention biases", source, c.family));
  if (f.boolean("mlp_bias", false))
    throw InputError(fmt::format("{}: mlp_bias is true; xtrain's MLP has no biases", source));
  if (f.boolean("use_sliding_window", false))
    throw InputError(fmt::format("{}: use_sliding_window is true; xtrain's {} attends to the whole sequence", source,
                                 c.family));
  if (experts == Experts::mixtral)
    read_mixtral_experts(json, source, c);
  else if (experts == Experts::qwen3_moe)
    read_experts(json, source, c);
  return c;
}

// transformers' checkpoints hold each expert's projections apart: the stacked gate_up_proj
// [E, 2I, H] is, flattened, expert 0's gate then up projection, then expert 1's, ...; down_proj
// [E, H, I] each expert's down projection. Qwen3-MoE names them as its dense MLP does, under
// mlp.experts.N; Mixtral as w1 (gate), w3 (up) and w2 (down) under block_sparse_moe.experts.N.
}  // namespace

std::vector<std::string> hf_expert_parts(const std::string& name, int64_t experts, bool mixtral) {
  static const std::string gate_up = ".mlp.experts.gate_up_proj", down = ".mlp.experts.down_proj";
  std::vector<std::string> projections;
  std::string layer;
  if (ends_with(name, gate_up)) {
    layer = name.substr(0, name.size() - gate_up.size());
    projections = mixtral ? std::vector<std::string>{"w1", "w3"} : std::vector<std::string>{"gate_proj", "up_proj"};
  } else if (ends_with(name, down)) {
    layer = name.substr(0, name.size() - down.size());
    projections = {mixtral ? "w2" : "down_proj"};
  } else {
    return {};
  }
  std::vector<std::string> parts;
  for (int64_t e = 0; e < experts; ++e)
    for (const auto& projection : projections)
      parts.push_back(fmt::format("{}.{}.experts.{}.{}.weight", layer, mixtral ? "block_sparse_moe" : "mlp", e,
                                  projection));
  return parts;
}

namespace {

// One family of the Llama decoder: its names, what its attention adds, and its experts. Every
// one splits over tensor and pipeline parallelism, mixtures of experts over parallel.ep too.
ModelSpec decoder_spec(const char* family, const char* architecture, const char* description,
                       AttentionFeatures features, Experts experts = Experts::none) {
  ModelSpec spec;
  spec.capabilities.experts = experts != Experts::none;
  spec.capabilities.tensor_parallel = spec.capabilities.pipeline = true;
  spec.capabilities.context_parallel = true;
  spec.family = family;
  spec.hf_architecture = architecture;
  spec.hf_model_type = family;
  spec.description = description;
  spec.architecture = Architecture::llama_decoder;
  spec.attention = features;
  // Attention's projections, and the MLP's in a dense family. A mixture's experts are 3-D tensors,
  // and PEFT reads gate_proj, up_proj and down_proj there as the experts' parameters (its
  // target_parameters), not the dense layers' MLPs: its adapters stay on attention here.
  std::vector<std::string> targets{"q_proj", "k_proj", "v_proj", "o_proj"};
  if (experts == Experts::none) targets.insert(targets.end(), {"gate_proj", "up_proj", "down_proj"});
  spec.lora_targets = [targets](const ModelConfig&) { return targets; };
  // The spec is captured by value: the lambdas outlive this function's copy.
  const ModelSpec names = spec;
  spec.to_hf_config = [names, features, experts](const ModelConfig& config, int64_t eos) {
    return hf_config(names, features, experts, config, eos);
  };
  spec.from_hf_config = [names, features, experts](const nlohmann::json& json, const std::string& source) {
    return config_from_hf(names, features, experts, json, source);
  };
  spec.to_hf_name = spec.from_hf_name = [](const std::string& name) { return name; };
  if (experts != Experts::none)
    spec.hf_parts = [mixtral = experts == Experts::mixtral](const std::string& name, int64_t first) {
      return hf_expert_parts(name, first, mixtral);
    };
  // Matrices (embeddings, projections) decay; norm gains and biases do not.
  spec.decays = [](const std::string& /*name*/, int64_t dims) { return dims >= 2; };
  return spec;
}

}  // namespace

ModelSpec llama_spec() {
  return decoder_spec("llama", "LlamaForCausalLM", "RMSNorm, rotary embeddings, grouped-query attention, SwiGLU",
                      {});
}

ModelSpec qwen2_spec() {
  return decoder_spec("qwen2", "Qwen2ForCausalLM", "llama with biases on the q, k and v projections",
                      AttentionFeatures{/*qkv_bias=*/true, /*qk_norm=*/false});
}

ModelSpec qwen3_moe_spec() {
  return decoder_spec("qwen3_moe", "Qwen3MoeForCausalLM",
                      "qwen3 whose feed-forward layers are mixtures of experts (model.num_experts)",
                      AttentionFeatures{/*qkv_bias=*/false, /*qk_norm=*/true}, Experts::qwen3_moe);
}

ModelSpec mixtral_spec() {
  auto spec = decoder_spec("mixtral", "MixtralForCausalLM",
                           "llama whose every feed-forward layer is a mixture of experts (model.num_experts)", {},
                           Experts::mixtral);
  // The router lives under block_sparse_moe in Mixtral's checkpoints.
  spec.to_hf_name = [](const std::string& name) {
    static const std::string router = ".mlp.gate.weight";
    return ends_with(name, router) ? name.substr(0, name.size() - router.size()) + ".block_sparse_moe.gate.weight"
                                   : name;
  };
  spec.from_hf_name = [](const std::string& name) {
    static const std::string router = ".block_sparse_moe.gate.weight";
    return ends_with(name, router) ? name.substr(0, name.size() - router.size()) + ".mlp.gate.weight" : name;
  };
  spec.check = [](const ModelConfig& c) {
    std::vector<std::pair<std::string, std::string>> problems;
    if (c.first_k_dense != 0 || c.moe_layer_step != 1)
      problems.emplace_back(c.first_k_dense != 0 ? "model.first_k_dense" : "model.moe_layer_step",
                            "mixtral's layers are all mixtures of experts: leave first_k_dense at 0 and moe_layer_step "
                            "at 1 (qwen3_moe places dense layers)");
    if (!c.norm_topk_prob)
      problems.emplace_back("model.norm_topk_prob", "mixtral always renormalises the top-k weights: leave it true");
    return problems;
  };
  return spec;
}

ModelSpec qwen3_spec() {
  return decoder_spec("qwen3", "Qwen3ForCausalLM",
                      "llama with RMSNorm on q and k per head, and model.head_dim set apart",
                      AttentionFeatures{/*qkv_bias=*/false, /*qk_norm=*/true});
}

}  // namespace xtrain::model

#include "model/spec/deepseek_family.h"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/spec/hf_fields.h"
#include "model/spec/llama_family.h"
#include "util/input_error.h"

namespace xtrain::model {
namespace {

nlohmann::json deepseek_hf_config(const ModelSpec& spec, const ModelConfig& c, int64_t eos_token_id) {
  nlohmann::json rope = {{"rope_type", "default"}, {"rope_theta", c.rope_theta}};
  if (c.rope_scaling.enabled()) {
    rope = hf_rope_scaling(c.rope_scaling);
    rope["rope_theta"] = c.rope_theta;
  }
  const auto& latent = c.latent;
  return {
      {"architectures", {spec.hf_architecture}},
      {"model_type", spec.hf_model_type},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"moe_intermediate_size", c.moe_intermediate_size},
      {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_heads},
      {"num_key_value_heads", c.num_heads},
      {"n_shared_experts", c.num_shared_experts},
      {"n_routed_experts", c.num_experts},
      {"num_experts_per_tok", c.num_experts_per_tok},
      {"routed_scaling_factor", c.routed_scaling_factor},
      {"n_group", c.n_group},
      {"topk_group", c.topk_group},
      {"norm_topk_prob", c.norm_topk_prob},
      {"first_k_dense_replace", c.first_k_dense},
      {"kv_lora_rank", latent.kv_lora_rank},
      {"q_lora_rank", latent.q_lora_rank > 0 ? nlohmann::json(latent.q_lora_rank) : nlohmann::json(nullptr)},
      {"qk_nope_head_dim", latent.qk_nope_head_dim},
      {"qk_rope_head_dim", latent.qk_rope_head_dim},
      {"v_head_dim", latent.v_head_dim},
      {"rope_interleave", latent.rope_interleave},
      {"rope_parameters", rope},
      {"max_position_embeddings", c.max_seq_len},
      {"rms_norm_eps", c.norm_eps},
      {"tie_word_embeddings", c.tie_embeddings},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"initializer_range", c.init_std},
      {"num_nextn_predict_layers", c.mtp_layers},
      {"bos_token_id", eos_token_id},
      {"eos_token_id", eos_token_id},
      {"torch_dtype", "float32"},
      {"use_cache", true},
  };
}

// transformers' DeepseekV3Config defaults stand where config.json leaves a field out.
ModelConfig deepseek_config_from_hf(const ModelSpec& spec, const nlohmann::json& json, const std::string& source) {
  const HfFields f(json, source);
  ModelConfig c;
  c.family = spec.family;
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("hidden_size");
  c.intermediate_size = f.integer("intermediate_size");
  c.num_layers = f.integer("num_hidden_layers");
  c.num_heads = f.integer("num_attention_heads");
  c.num_kv_heads = c.num_heads;
  if (c.num_heads < 1)
    throw InputError(fmt::format("{}: num_attention_heads {} must be at least 1", source, c.num_heads));
  if (f.integer("num_key_value_heads", c.num_heads) != c.num_heads)
    throw InputError(fmt::format("{}: num_key_value_heads {} differs from num_attention_heads {}; latent attention "
                                 "expands every head's key and value from the shared latent",
                                 source, f.integer("num_key_value_heads"), c.num_heads));
  c.max_seq_len = f.integer("max_position_embeddings", 4096);
  read_hf_rope(json, source, c);
  c.norm_eps = f.number("rms_norm_eps", 1e-6);
  c.init_std = f.number("initializer_range", 0.02);
  c.tie_embeddings = f.boolean("tie_word_embeddings", false);
  auto& latent = c.latent;
  latent.q_lora_rank = f.integer("q_lora_rank", 0);
  latent.kv_lora_rank = f.integer("kv_lora_rank", 512);
  latent.qk_nope_head_dim = f.integer("qk_nope_head_dim", 128);
  latent.qk_rope_head_dim = f.integer("qk_rope_head_dim", 64);
  latent.v_head_dim = f.integer("v_head_dim", 128);
  latent.rope_interleave = f.boolean("rope_interleave", true);
  c.num_experts = f.integer("n_routed_experts", f.integer("num_local_experts", 256));
  c.num_experts_per_tok = f.integer("num_experts_per_tok", 8);
  c.moe_intermediate_size = f.integer("moe_intermediate_size", 2048);
  c.num_shared_experts = f.integer("n_shared_experts", 1);
  c.routed_scaling_factor = f.number("routed_scaling_factor", 2.5);
  c.n_group = f.integer("n_group", 8);
  c.topk_group = f.integer("topk_group", 4);
  c.norm_topk_prob = f.boolean("norm_topk_prob", true);
  c.first_k_dense = f.integer("first_k_dense_replace", 3);
  c.mtp_layers = f.integer("num_nextn_predict_layers", 0);
  c.router = Router::sigmoid_bias;
  c.router_aux_loss_coef = 0;  // balanced by the expert bias, without an auxiliary loss
  if (f.text("hidden_act", "silu") != "silu")
    throw InputError(fmt::format("{}: hidden_act \"{}\"; xtrain's MLP is SwiGLU (silu)", source,
                                 f.text("hidden_act", "")));
  if (f.boolean("attention_bias", false))
    throw InputError(fmt::format("{}: attention_bias is true; xtrain's latent attention has no biases", source));
  return c;
}

// What the layers need of a deepseek_v3 shape, as (key, message).
std::vector<std::pair<std::string, std::string>> deepseek_problems(const ModelConfig& c) {
  std::vector<std::pair<std::string, std::string>> problems;
  const auto& latent = c.latent;
  if (!latent.enabled())
    problems.emplace_back("model.kv_lora_rank", "deepseek_v3 attends through a latent: set kv_lora_rank (512 in "
                                                "DeepSeek-V3), qk_nope_head_dim, qk_rope_head_dim and v_head_dim");
  else if (latent.qk_nope_head_dim < 1 || latent.qk_rope_head_dim < 2 || latent.qk_rope_head_dim % 2 != 0 ||
           latent.v_head_dim < 1)
    problems.emplace_back("model.qk_rope_head_dim",
                          fmt::format("latent heads need qk_nope_head_dim >= 1, an even qk_rope_head_dim >= 2 and "
                                      "v_head_dim >= 1 (got {}, {}, {})",
                                      latent.qk_nope_head_dim, latent.qk_rope_head_dim, latent.v_head_dim));
  if (c.num_kv_heads != 0 && c.num_kv_heads != c.num_heads)
    problems.emplace_back("model.num_kv_heads", "latent attention gives every head its own key and value: leave "
                                                "num_kv_heads out (or equal to num_heads)");
  if (c.num_experts > 0 && c.router != Router::sigmoid_bias)
    problems.emplace_back("model.router", "deepseek_v3 routes by sigmoid scores and the expert bias: set "
                                          "model.router: sigmoid_bias");
  if (c.num_experts > 0 && c.num_shared_experts < 1)
    problems.emplace_back("model.num_shared_experts", "deepseek_v3's MoE layers have shared experts: set "
                                                      "num_shared_experts >= 1 (1 in DeepSeek-V3)");
  if (c.moe_layer_step != 1)
    problems.emplace_back("model.moe_layer_step", "deepseek_v3's layers after first_k_dense are all MoE layers: "
                                                  "leave moe_layer_step at 1");
  if (c.mtp_layers > 0 && c.num_layers < 1)
    problems.emplace_back("model.mtp_layers", "multi-token prediction follows the decoder's layers");
  if (c.num_experts > 0 && c.capacity_factor > 0)
    problems.emplace_back("model.capacity_factor", "transformers' DeepseekV3MoE is dropless: leave it at 0");
  return problems;
}

// The layer index of a name under model.layers.N., or -1.
int64_t layer_of(const std::string& name) {
  static const std::string prefix = "model.layers.";
  if (name.rfind(prefix, 0) != 0) return -1;
  const auto end = name.find('.', prefix.size());
  if (end == std::string::npos) return -1;
  try {
    return std::stoll(name.substr(prefix.size(), end - prefix.size()));
  } catch (const std::exception&) {
    return -1;
  }
}

bool is_shared_copy(const std::string& name) {
  return ends_with(name, ".embed_tokens.weight") || ends_with(name, ".shared_head.head.weight");
}

}  // namespace

ModelSpec deepseek_v3_spec() {
  ModelSpec spec;
  spec.family = "deepseek_v3";
  spec.hf_architecture = "DeepseekV3ForCausalLM";
  spec.hf_model_type = "deepseek_v3";
  spec.description =
      "multi-head latent attention (model.kv_lora_rank, q_lora_rank), dense first layers, then "
      "sigmoid-routed experts with shared experts and the expert bias (DeepSeek-V3)";
  spec.capabilities.experts = true;
  spec.capabilities.context_parallel = true;
  spec.capabilities.multi_token_prediction = true;
  spec.capabilities.tensor_parallel = spec.capabilities.pipeline = true;
  spec.architecture = Architecture::llama_decoder;
  const ModelSpec names = spec;
  spec.to_hf_config = [names](const ModelConfig& config, int64_t eos) { return deepseek_hf_config(names, config, eos); };
  spec.from_hf_config = [names](const nlohmann::json& json, const std::string& source) {
    return deepseek_config_from_hf(names, json, source);
  };
  spec.to_hf_name = spec.from_hf_name = [](const std::string& name) { return name; };
  spec.hf_parts = [](const std::string& name, int64_t first) { return hf_expert_parts(name, first, false); };
  spec.hf_buffer = [](const std::string& name) { return ends_with(name, ".mlp.gate.e_score_correction_bias"); };
  spec.hf_unused = [](const ModelConfig& c, const std::string& name) {
    const int64_t layer = layer_of(name);
    return layer >= c.num_layers + c.mtp_layers || (layer >= c.num_layers && is_shared_copy(name));
  };
  spec.hf_copies = [](const ModelConfig& c) {
    std::vector<std::pair<std::string, std::string>> copies;
    for (int64_t i = 0; i < c.mtp_layers; ++i) {
      const auto prefix = fmt::format("model.layers.{}.", c.num_layers + i);
      copies.emplace_back(prefix + "embed_tokens.weight", "model.embed_tokens.weight");
      copies.emplace_back(prefix + "shared_head.head.weight",
                          c.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
    }
    return copies;
  };
  spec.decays = [](const std::string& /*name*/, int64_t dims) { return dims >= 2; };
  spec.check = deepseek_problems;
  // Latent attention's projections: the queries' bottleneck where q_lora_rank has one. (Its MLPs'
  // gate_proj, up_proj and down_proj would name the experts too: PEFT reads them so.)
  spec.lora_targets = [](const ModelConfig& c) {
    std::vector<std::string> queries{"q_proj"};
    if (c.latent.q_lora_rank > 0) queries = {"q_a_proj", "q_b_proj"};
    queries.insert(queries.end(), {"kv_a_proj_with_mqa", "kv_b_proj", "o_proj"});
    return queries;
  };
  return spec;
}

}  // namespace xtrain::model

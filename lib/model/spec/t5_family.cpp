#include "model/spec/t5_family.h"

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/spec/hf_fields.h"
#include "util/input_error.h"

namespace xtrain::model {
namespace {

// transformers 5 writes tie_word_embeddings true for both styles and tells v1.1 apart by
// scale_decoder_outputs false (and a stored lm_head); 4.x wrote tie_word_embeddings false for
// v1.1. Both fields are written, so that either version reads the style back.
nlohmann::json t5_config(const ModelConfig& c, int64_t eos_token_id) {
  const auto& ed = c.encoder_decoder;
  return {{"architectures", {"T5ForConditionalGeneration"}},
          {"model_type", "t5"},
          {"vocab_size", c.vocab_size},
          {"d_model", c.hidden_size},
          {"d_kv", c.head_dim()},
          {"d_ff", c.intermediate_size},
          {"num_layers", c.num_layers},
          {"num_decoder_layers", ed.decoder_depth(c.num_layers)},
          {"num_heads", c.num_heads},
          {"relative_attention_num_buckets", ed.relative_buckets},
          {"relative_attention_max_distance", ed.relative_max_distance},
          {"dropout_rate", c.dropout},
          {"layer_norm_epsilon", c.norm_eps},
          {"initializer_factor", 1.0},
          {"feed_forward_proj", ed.gated_gelu ? "gated-gelu" : "relu"},
          {"is_encoder_decoder", true},
          {"pad_token_id", c.pad_token_id},
          {"decoder_start_token_id", c.pad_token_id},
          {"eos_token_id", eos_token_id},
          {"tie_word_embeddings", c.tie_embeddings},
          {"scale_decoder_outputs", c.tie_embeddings},
          {"torch_dtype", "float32"}};
}

ModelConfig config_from_t5(const nlohmann::json& json, const std::string& source) {
  const HfFields f(json, source);
  ModelConfig c;
  c.family = "t5";
  c.vocab_size = f.integer("vocab_size", 32128);
  c.hidden_size = f.integer("d_model", 512);
  c.head_dim_override = f.integer("d_kv", 64);
  c.intermediate_size = f.integer("d_ff", 2048);
  c.num_layers = f.integer("num_layers", 6);
  c.num_heads = c.num_kv_heads = f.integer("num_heads", 8);
  auto& ed = c.encoder_decoder;
  ed.decoder_layers = f.integer("num_decoder_layers", c.num_layers);
  ed.relative_buckets = f.integer("relative_attention_num_buckets", 32);
  ed.relative_max_distance = f.integer("relative_attention_max_distance", 128);
  c.norm_eps = f.number("layer_norm_epsilon", 1e-6);
  c.pad_token_id = f.integer("pad_token_id", 0);
  c.max_seq_len = f.integer("n_positions", 512);  // relative positions: no limit of the model's own
  const auto proj = f.text("feed_forward_proj", "relu");
  if (proj != "relu" && proj != "gated-gelu")
    throw InputError(fmt::format("{}: feed_forward_proj \"{}\"; xtrain's T5 computes \"relu\" (T5 v1.0) or "
                                 "\"gated-gelu\" (T5 v1.1)",
                                 source, proj));
  ed.gated_gelu = proj == "gated-gelu";
  c.tie_embeddings = json.contains("scale_decoder_outputs") && !json.at("scale_decoder_outputs").is_null()
                         ? f.boolean("scale_decoder_outputs", true)
                         : f.boolean("tie_word_embeddings", true);
  if (f.integer("decoder_start_token_id", c.pad_token_id) != c.pad_token_id)
    throw InputError(fmt::format("{}: decoder_start_token_id {} is not pad_token_id {}; xtrain's T5 starts the "
                                 "decoder with the padding id, as T5 does",
                                 source, f.integer("decoder_start_token_id", 0), c.pad_token_id));
  if (c.num_heads <= 0 || c.head_dim_override <= 0 || c.hidden_size <= 0 || ed.decoder_layers < 1 || c.num_layers < 1)
    throw InputError(fmt::format("{}: d_model {}, d_kv {}, num_heads {}, num_layers {} and num_decoder_layers {} "
                                 "must be positive",
                                 source, c.hidden_size, c.head_dim_override, c.num_heads, c.num_layers,
                                 ed.decoder_layers));
  if (ed.relative_buckets < 4 || ed.relative_max_distance <= ed.relative_buckets / 4)
    throw InputError(fmt::format("{}: relative_attention_num_buckets {} and relative_attention_max_distance {} "
                                 "leave no logarithmic buckets (at least 4 buckets, and a distance beyond a "
                                 "quarter of them)",
                                 source, ed.relative_buckets, ed.relative_max_distance));
  return c;
}

bool in_block(const std::string& name, const char* part) { return name.find(part) != std::string::npos; }

}  // namespace

ModelSpec t5_spec() {
  ModelSpec spec;
  spec.family = "t5";
  spec.hf_architecture = "T5ForConditionalGeneration";
  spec.hf_model_type = "t5";
  spec.description = "encoder-decoder: pre-norm RMS layers, relative position buckets, cross-attention; v1.0 "
                     "(ReLU, tied) or v1.1 (gated GELU, untied); trained on span corruption "
                     "(data.objective span_corruption)";
  // Split by tensor parallelism (without sequence parallelism) and into pipeline stages, not by
  // context parallelism, no experts (FSDP shards it); it does not generate through the
  // decoder-only path.
  spec.capabilities.tensor_parallel = spec.capabilities.pipeline = true;
  spec.capabilities.causal = false;
  spec.capabilities.pad_token = true;
  spec.capabilities.encoder_decoder = true;
  spec.capabilities.dropout = true;  // dropout_rate, model/t5/t5.h
  spec.architecture = Architecture::t5;
  spec.to_hf_config = t5_config;
  spec.from_hf_config = config_from_t5;
  spec.to_hf_name = spec.from_hf_name = [](const std::string& name) { return name; };
  // Checkpoints of transformers 4 and the original release store the shared table again under
  // each stack, and a tied model's head: copies of shared.weight, not read.
  spec.hf_unused = [](const ModelConfig& c, const std::string& name) {
    return name == "encoder.embed_tokens.weight" || name == "decoder.embed_tokens.weight" ||
           (c.tie_embeddings && name == "lm_head.weight") ||
           name == "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight";
  };
  // T5 trains with Adafactor and no decay; under AdamW, as transformers' Trainer: the matrices
  // decay, the norms' gains do not; neither do the position tables, which are biases.
  spec.decays = [](const std::string& name, int64_t dims) {
    return dims >= 2 && !in_block(name, "relative_attention_bias");
  };
  spec.check = [](const ModelConfig& c) {
    std::vector<std::pair<std::string, std::string>> problems;
    if (c.num_kv_heads != 0 && c.num_kv_heads != c.num_heads)
      problems.emplace_back("model.num_kv_heads", "t5's attention has as many key/value heads as query heads");
    return problems;
  };
  return spec;
}

}  // namespace xtrain::model

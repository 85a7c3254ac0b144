// LlamaConfig: the shape of a Llama-style decoder, independent of recipes and parallelism, and
// the family it belongs to. The families differ from Llama in attention only: "qwen2" adds
// biases to the q, k and v projections; "qwen3" normalises q and k per head (RMSNorm over
// head_dim, before the rotation) and may set head_dim apart from hidden_size / num_heads.
#pragma once
#include <cstdint>
#include <string>

namespace xtrain::model {

// Llama 3's rotary scaling (transformers' rope_type "llama3"): wavelengths longer than
// original_max_len / low_freq_factor are stretched by factor, shorter than
// original_max_len / high_freq_factor kept, and those between blended. factor 0: none.
struct RopeScaling {
  double factor = 0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_len = 8192;
  bool enabled() const { return factor > 0; }
};

struct LlamaConfig {
  std::string family = "llama";  // llama, qwen2 or qwen3
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t intermediate_size = 0;
  int64_t max_seq_len = 0;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  double norm_eps = 1e-5;
  bool tie_embeddings = false;
  double init_std = 0.02;
  int64_t head_dim_override = 0;  // 0: hidden_size / num_heads

  int64_t head_dim() const { return head_dim_override > 0 ? head_dim_override : hidden_size / num_heads; }
  bool attention_bias() const { return family == "qwen2"; }
  bool qk_norm() const { return family == "qwen3"; }
};

}  // namespace xtrain::model

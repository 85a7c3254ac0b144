// LlamaConfig: the shape of a Llama-style decoder, independent of recipes and parallelism.
#pragma once
#include <cstdint>

namespace xtrain::model {

struct LlamaConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t intermediate_size = 0;
  int64_t max_seq_len = 0;
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  bool tie_embeddings = false;
  double init_std = 0.02;

  int64_t head_dim() const { return hidden_size / num_heads; }
};

}  // namespace xtrain::model

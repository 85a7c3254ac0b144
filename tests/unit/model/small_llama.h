// Shapes of the small Llama models the unit tests build.
#pragma once
#include <string>

#include "model/llama_config.h"

namespace xtrain::testing {

struct SmallLlama {
  int64_t vocab = 50, hidden = 32, layers = 2, heads = 4, kv_heads = 2, intermediate = 64, max_seq_len = 16;
  bool tied = false;
  std::string family = "llama";
  int64_t head_dim = 0;  // 0: hidden / heads

  model::LlamaConfig config() const {
    model::LlamaConfig c;
    c.vocab_size = vocab;
    c.hidden_size = hidden;
    c.num_layers = layers;
    c.num_heads = heads;
    c.num_kv_heads = kv_heads;
    c.intermediate_size = intermediate;
    c.max_seq_len = max_seq_len;
    c.tie_embeddings = tied;
    c.family = family;
    c.head_dim_override = head_dim;
    return c;
  }
};

}  // namespace xtrain::testing

// Shapes of the small Llama models the unit tests build.
#pragma once
#include "model/llama_config.h"

namespace xtrain::testing {

struct SmallLlama {
  int64_t vocab = 50, hidden = 32, layers = 2, heads = 4, kv_heads = 2, intermediate = 64, max_seq_len = 16;
  bool tied = false;

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
    return c;
  }
};

}  // namespace xtrain::testing

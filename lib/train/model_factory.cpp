#include "train/model_factory.h"

#include <torch/torch.h>

namespace xtrain::train {

model::LlamaConfig llama_config(const config::ModelSection& m) {
  model::LlamaConfig c;
  c.vocab_size = m.vocab_size;
  c.hidden_size = m.hidden_size;
  c.num_layers = m.num_layers;
  c.num_heads = m.num_heads;
  c.num_kv_heads = m.num_kv_heads;
  c.intermediate_size = m.intermediate_size;
  c.max_seq_len = m.max_seq_len;
  c.rope_theta = m.rope_theta;
  c.norm_eps = m.norm_eps;
  c.tie_embeddings = m.tie_embeddings;
  c.init_std = m.init_std;
  return c;
}

model::LlamaForCausalLM build_model(const config::Recipe& recipe) {
  torch::manual_seed(static_cast<uint64_t>(recipe.run.seed));
  return model::LlamaForCausalLM(llama_config(recipe.model));
}

}  // namespace xtrain::train

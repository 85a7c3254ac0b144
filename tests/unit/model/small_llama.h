// Shapes of the small Llama models the unit tests build.
#pragma once
#include <memory>
#include <string>

#include "model/causal_lm.h"
#include "model/spec/model_config.h"
#include "model/model_builder.h"
#include "model/spec/model_spec.h"

namespace xtrain::testing {

struct SmallLlama {
  int64_t vocab = 50, hidden = 32, layers = 2, heads = 4, kv_heads = 2, intermediate = 64, max_seq_len = 16;
  bool tied = false;
  std::string family = "llama";
  int64_t head_dim = 0;  // 0: hidden / heads
  // Mixture of experts (qwen3_moe): experts of each MoE layer, top k, expert width, dense layers first.
  int64_t experts = 0, experts_per_tok = 0, moe_intermediate = 0, first_k_dense = 0;

  model::ModelConfig config() const {
    model::ModelConfig c;
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
    c.num_experts = experts;
    c.num_experts_per_tok = experts_per_tok;
    c.moe_intermediate_size = moe_intermediate;
    c.first_k_dense = first_k_dense;
    return c;
  }
  // The MoE shape the tests use: layer 0 dense, the others with 4 experts of `width`, 2 per token.
  SmallLlama& with_experts(int64_t width) {
    experts = 4;
    experts_per_tok = 2;
    moe_intermediate = width;
    first_k_dense = 1;
    return *this;
  }
  // The model of this shape and family, its weights drawn from `seed`.
  std::shared_ptr<model::CausalLM> build(uint64_t seed = 1) const { return model::build_model(config(), seed); }
};

// The logits of ids laid out as `layout`.
inline torch::Tensor logits(model::CausalLM& model, const torch::Tensor& ids, const model::SequenceLayout& layout = {}) {
  model::Batch batch;
  batch.input_ids = ids;
  batch.layout = layout;
  return model.logits(batch);
}

}  // namespace xtrain::testing

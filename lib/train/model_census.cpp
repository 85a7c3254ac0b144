#include "train/model_census.h"

#include <map>

#include <torch/torch.h>

#include "optim/muon.h"
#include "train/model_factory.h"

namespace xtrain::train {
namespace {

bool contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

void count_layer_parameter(plan::LayerCensus& layer, const std::string& name, const torch::Tensor& p,
                           const model::ModelConfig& m) {
  const int64_t n = p.numel();
  const bool matrix = p.dim() >= 2;
  if (contains(name, ".experts.") && matrix) {
    layer.experts += n;
    layer.active_experts += n / m.num_experts * m.num_experts_per_tok;
  } else if (contains(name, "mlp.gate.") || contains(name, "mlp.router.") || !matrix) {
    layer.other += n;  // the router, norms, biases
  } else if (contains(name, "self_attn.") || contains(name, "attention.") || contains(name, "Attention.")) {
    layer.attention += n;  // llama's self_attn, bert's and vit's attention, t5's SelfAttention and EncDecAttention
  } else {
    layer.dense += n;  // a dense MLP, the shared experts and their gate, a prediction depth's projection
  }
}

// The token table, by each family's name for it.
bool is_token_table(const std::string& name) {
  return contains(name, "embed_tokens") || contains(name, "word_embeddings") || name == "shared.weight";
}

}  // namespace

// The layers are the shard plan's blocks, as FSDP and the pipeline cut them (a decoder's layers
// and prediction depths; an encoder's; t5's encoder then decoder blocks), less a vision tower's,
// which count with the rest outside the layers.
plan::ModelCensus model_census(const config::Recipe& recipe) {
  const auto model = build_model(recipe);
  const auto& m = recipe.model;
  const auto blocks = model->shard_plan().blocks;
  const auto vision = static_cast<size_t>(model->vision_blocks());
  plan::ModelCensus c;
  c.layers.resize(blocks.size() - vision);
  c.prediction_depths = m.mtp_layers;
  std::map<std::string, int64_t> layer_of;  // the parameters of the layers
  for (size_t b = vision; b < blocks.size(); ++b)
    for (const auto& unit : blocks[b])
      for (const auto& [name, p] : unit.parameters) layer_of[name] = static_cast<int64_t>(b - vision);
  for (const auto& item : model->named_parameters()) {
    const auto& name = item.key();
    const auto& p = item.value();
    const auto layer = layer_of.find(name);
    const bool in_layer = layer != layer_of.end();
    if (optim::muon_takes(name, static_cast<size_t>(p.dim())))
      c.muon_matrices.push_back({p.size(-2), p.size(-1), p.dim() == 3 ? p.size(0) : 1, in_layer ? layer->second : -1,
                                 p.dim() == 3});
    if (in_layer) count_layer_parameter(c.layers[static_cast<size_t>(layer->second)], name, p, m);
    else if (is_token_table(name)) c.embedding += p.numel();
    else if (contains(name, "lm_head")) c.head += p.numel();
    else c.other += p.numel();
  }
  c.hidden = m.hidden_size;
  c.heads = m.num_heads;
  const int64_t kv_heads = m.num_kv_heads > 0 ? m.num_kv_heads : m.num_heads;
  if (m.latent.enabled()) {
    c.query_width = m.num_heads * m.latent.qk_head_dim();
    c.key_width = m.num_heads * m.latent.qk_head_dim();  // keys are expanded per head from the latent
    c.value_width = m.num_heads * m.latent.v_head_dim;
  } else {
    c.query_width = m.num_heads * m.head_dim();
    c.key_width = kv_heads * m.head_dim();
    c.value_width = m.num_heads * m.head_dim();
  }
  c.intermediate = m.intermediate_size;
  c.moe_intermediate = m.moe_intermediate_size;
  c.experts = m.num_experts;
  c.top_k = m.num_experts_per_tok;
  c.shared_experts = m.num_shared_experts;
  c.vocab = m.vocab_size;
  return c;
}

}  // namespace xtrain::train

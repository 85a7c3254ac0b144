#include "train/model_census.h"

#include <regex>

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
  } else if (contains(name, "self_attn.")) {
    layer.attention += n;
  } else {
    layer.dense += n;  // a dense MLP, the shared experts and their gate, a prediction depth's projection
  }
}

}  // namespace

plan::ModelCensus model_census(const config::Recipe& recipe) {
  const auto model = build_model(recipe);
  const auto& m = recipe.model;
  plan::ModelCensus c;
  c.layers.resize(static_cast<size_t>(m.num_layers + m.mtp_layers));
  c.prediction_depths = m.mtp_layers;
  static const std::regex layer_name(R"((^|\.)layers\.(\d+)\.)");
  for (const auto& item : model->named_parameters()) {
    const auto& name = item.key();
    const int64_t n = item.value().numel();
    std::smatch match;
    const bool in_layer = !contains(name, "vision") && std::regex_search(name, match, layer_name);
    if (const auto& p = item.value(); optim::muon_takes(name, static_cast<size_t>(p.dim())))
      c.muon_matrices.push_back({p.size(-2), p.size(-1), p.dim() == 3 ? p.size(0) : 1,
                                 in_layer ? std::stoll(match[2].str()) : -1, p.dim() == 3});
    if (in_layer) {
      const auto index = static_cast<size_t>(std::stoll(match[2].str()));
      if (index < c.layers.size()) {
        count_layer_parameter(c.layers[index], name, item.value(), m);
        continue;
      }
    }
    if (contains(name, "embed_tokens")) c.embedding += n;
    else if (contains(name, "lm_head")) c.head += n;
    else c.other += n;
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

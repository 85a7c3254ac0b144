// The specs of the families that share the Llama decoder (model/llama.h): llama, qwen2 (biases
// on q, k and v), qwen3 (RMSNorm on q and k per head, head_dim set apart from
// hidden_size / num_heads) and qwen3_moe (qwen3 with mixture-of-experts layers, transformers 5's
// stacked expert tensors). Their tensor names are Hugging Face's already, and the rotary
// layout is HF's rotate_half layout, so tensors map 1:1 with no permutation.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/spec/attention_features.h"
#include "model/spec/model_spec.h"

namespace xtrain::model {

ModelSpec llama_spec();
ModelSpec qwen2_spec();
ModelSpec qwen3_spec();
ModelSpec qwen3_moe_spec();
ModelSpec mixtral_spec();

// The rotary embedding of a config.json (rope_theta, and rope_parameters or rope_scaling of type
// default, llama3 or yarn) into c, whose max_seq_len must be read already; another type is an
// InputError naming `source`. A file with both keys is read when they give the same embedding,
// and refused when they do not (transformers takes rope_scaling, xtrain cannot tell the meant one).
void read_hf_rope(const nlohmann::json& json, const std::string& source, ModelConfig& c);
// The scaling as transformers' rope_scaling / rope_parameters fields (null when none).
nlohmann::json hf_rope_scaling(const RopeScaling& scaling);

// The tensors transformers' checkpoints store a stacked expert parameter as (each expert's
// projections apart, under mlp.experts.N, or Mixtral's block_sparse_moe.experts.N w1/w3/w2);
// none for another name.
std::vector<std::string> hf_expert_parts(const std::string& name, int64_t experts, bool mixtral);

bool ends_with(const std::string& text, const std::string& suffix);

// xtrain's load-balancing coefficient for a config.json's router_aux_loss_coef: transformers'
// loss is top_k times xtrain's, so its coefficient is xtrain's divided by top_k. Export compares
// with this product to write an imported coefficient back unchanged (model/spec/hf_config.h).
inline double router_aux_loss_coef_from_hf(double hf_coef, int64_t top_k) {
  return hf_coef * static_cast<double>(top_k);
}

}  // namespace xtrain::model

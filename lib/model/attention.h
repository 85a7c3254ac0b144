// Grouped-query self-attention with rotary embeddings and a causal mask.
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "model/llama_config.h"
#include "model/rotary.h"

namespace xtrain::model {

// Causal scaled dot-product attention. q: [B, H, T, D]; k, v: [B, KV, T, D] with H a multiple
// of KV (kv head j serves query heads j*H/KV .. (j+1)*H/KV - 1). Softmax runs in fp32.
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const LlamaConfig& config);
  // x: [B, T, hidden]; rotary tables cover at least T positions.
  torch::Tensor forward(const torch::Tensor& x, const RotaryTables& rotary);

  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};

 private:
  int64_t num_heads_, num_kv_heads_, head_dim_;
};
TORCH_MODULE(Attention);

}  // namespace xtrain::model

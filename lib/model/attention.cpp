#include "model/attention.h"

#include <cmath>

#include <torch/torch.h>

namespace xtrain::model {

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t groups = q.size(1) / k.size(1);
  auto keys = groups == 1 ? k : k.repeat_interleave(groups, /*dim=*/1);
  auto values = groups == 1 ? v : v.repeat_interleave(groups, /*dim=*/1);
  const int64_t seq = q.size(2);
  // Scaling q ([T, D]) instead of the scores ([T, T]) touches seq/head_dim times fewer elements.
  auto scores = torch::matmul(q * (1.0 / std::sqrt(static_cast<double>(q.size(-1)))), keys.transpose(-2, -1));
  auto future = torch::ones({seq, seq}, torch::TensorOptions().dtype(torch::kBool)).triu(1);
  scores.masked_fill_(future, -std::numeric_limits<float>::infinity());
  // Softmax in at least fp32: bf16/fp16 scores lose too much in the exponent sum.
  auto probs = torch::softmax(scores, -1, at::promote_types(scores.scalar_type(), torch::kFloat32))
                   .to(q.scalar_type());
  return torch::matmul(probs, values);
}

AttentionImpl::AttentionImpl(const LlamaConfig& config)
    : num_heads_(config.num_heads), num_kv_heads_(config.num_kv_heads), head_dim_(config.head_dim()) {
  auto linear = [](int64_t in, int64_t out) {
    return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
  };
  q_proj = register_module("q_proj", linear(config.hidden_size, num_heads_ * head_dim_));
  k_proj = register_module("k_proj", linear(config.hidden_size, num_kv_heads_ * head_dim_));
  v_proj = register_module("v_proj", linear(config.hidden_size, num_kv_heads_ * head_dim_));
  o_proj = register_module("o_proj", linear(num_heads_ * head_dim_, config.hidden_size));
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const RotaryTables& rotary) {
  const int64_t batch = x.size(0), seq = x.size(1);
  auto heads = [&](const torch::Tensor& t, int64_t n) {
    return t.view({batch, seq, n, head_dim_}).transpose(1, 2);
  };
  auto cos = rotary.cos.narrow(0, 0, seq);
  auto sin = rotary.sin.narrow(0, 0, seq);
  auto q = apply_rotary(heads(q_proj(x), num_heads_), cos, sin);
  auto k = apply_rotary(heads(k_proj(x), num_kv_heads_), cos, sin);
  auto v = heads(v_proj(x), num_kv_heads_);
  auto out = causal_attention(q, k, v).transpose(1, 2).reshape({batch, seq, num_heads_ * head_dim_});
  return o_proj(out);
}

}  // namespace xtrain::model

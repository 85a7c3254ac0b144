// Multi-head latent attention (DeepSeek-V2/V3; transformers' DeepseekV3Attention, with its
// parameter names). Queries come from the hidden state through q_proj, or through the low-rank
// q_a_proj -> q_a_layernorm -> q_b_proj; keys and values from one latent: kv_a_proj_with_mqa
// gives kv_lora_rank latent features (normalised by kv_a_layernorm, then expanded per head by
// kv_b_proj into each head's unrotated key and its value) and qk_rope_head_dim features rotated
// once and shared by every head's key. Each head attends with q and k of
// qk_nope_head_dim + qk_rope_head_dim features and v of v_head_dim, at the softmax scale
// 1/sqrt(qk head dim) times YaRN's mscale^2 when the rotary scaling says so.
//
// Under tensor parallelism (use_tensor_parallel) each rank computes num_heads / tp heads, as
// Megatron splits MLA: the low-rank projections and their norms are replicated (their
// gradients, partial on each rank, summed through TensorParallelOps::shared and the norms'
// partial_gradient), the per-head projections q_proj or q_b_proj and kv_b_proj are
// column-parallel and o_proj row-parallel.
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "model/attention/attention.h"
#include "model/layers/linear.h"
#include "model/spec/model_config.h"
#include "model/layers/parameter_init.h"
#include "model/layers/rms_norm.h"
#include "model/layers/rotary.h"
#include "model/layers/sequence_layout.h"

namespace xtrain::model {

class LatentAttentionImpl : public AttentionLayer {
 public:
  explicit LatentAttentionImpl(const ModelConfig& config);
  // x: [B, T, hidden]; rotary tables of qk_rope_head_dim features cover every position.
  torch::Tensor forward(const torch::Tensor& x, const RotaryTables& rotary, const SequenceLayout& layout = {}) override;
  // Projections ~ N(0, std^2), o_proj ~ N(0, output_std^2), the norms' gains 1.
  void describe_init(const std::string& name, double std, double output_std, InitPlan& plan) const override;
  // The latent norms' kernels (the rotation here is unfused).
  void set_fused_kernels(bool fused) override;
  void float8_layers(const std::string& name, Float8Layers& layers) override;  // every projection
  // Each head its own key and value, decompressed from the shared latent (QK-clip refuses it).
  int64_t num_heads() const override { return num_heads_; }
  int64_t num_kv_heads() const override { return num_heads_; }
  std::string qk_clip_refusal() const override { return "latent attention (its keys come from a shared latent)"; }

  Linear q_proj{nullptr};                                   // without q_lora_rank
  Linear q_a_proj{nullptr}, q_b_proj{nullptr};              // with q_lora_rank
  RMSNorm q_a_layernorm{nullptr};
  Linear kv_a_proj_with_mqa{nullptr}, kv_b_proj{nullptr}, o_proj{nullptr};
  RMSNorm kv_a_layernorm{nullptr};

  TensorParallelPlan tensor_parallel_plan(int64_t rank, int64_t ranks) const override;
  void use_tensor_parallel(std::shared_ptr<TensorParallelOps> ops) override;

 private:
  torch::Tensor queries(const torch::Tensor& x);  // [B, T, heads * qk head dim]
  std::pair<torch::Tensor, torch::Tensor> rotate(const torch::Tensor& q, const torch::Tensor& k,
                                                 const RotaryTables& rotary, const SequenceLayout& layout) const;
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const SequenceLayout& layout) const;
  torch::Tensor replicated(Linear& projection, const torch::Tensor& x) const;

  LatentAttentionConfig latent_;
  int64_t num_heads_;
  RopeScaling rope_scaling_;
  std::shared_ptr<TensorParallelOps> tensor_parallel_;
};
TORCH_MODULE(LatentAttention);

}  // namespace xtrain::model

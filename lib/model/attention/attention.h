// Grouped-query self-attention with rotary embeddings and a causal mask. Under tensor
// parallelism (use_tensor_parallel) each rank computes num_heads / tp query heads: q, k and v
// are column-parallel and o row-parallel, between TensorParallelOps::enter and leave. Key and
// value heads split the same way when they divide by tp; with fewer of them than ranks, every
// rank holds them all and uses the one its query heads read.
#pragma once
#include <functional>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "model/attention/attention_layer.h"
#include "model/spec/attention_features.h"
#include "model/layers/linear.h"
#include "model/spec/model_config.h"
#include "model/layers/parameter_init.h"
#include "model/layers/rms_norm.h"
#include "model/layers/rotary.h"
#include "model/layers/sequence_layout.h"

namespace xtrain::model {

// What a layer's attention adds to causal softmax(q k^T / sqrt(D)) v. The default is plain
// causal attention; every kernel (eager, sdpa, blockwise, ring, Ulysses) takes each field.
struct AttentionVariant {
  // The softmax scale; 0: 1/sqrt(D), D = q's head dim (DeepSeek's YaRN sets mscale^2 / sqrt(D)).
  double scale = 0;
  // 0: a query sees every earlier key of its document; else only the `window` latest of them,
  // its own included: keys at row positions p - window + 1 .. p (transformers' sliding_window).
  int64_t window = 0;
  // [H] per-head sink logits (GPT-OSS), or undefined: one more softmax column per row whose value
  // is zero, so it only takes probability away from the keys. H is q's heads as the kernel sees
  // them: under tensor parallelism the caller passes its rank's heads. Gradients flow to it.
  torch::Tensor sinks;
  // When set, the eager kernel passes it the largest logit (q.k times the scale) of each query
  // head over the keys each query sees: [H] fp32, detached, from the scores it computes anyway
  // (optim.muon.qk_clip_tau). It may be called more than once a forward (packed segments, and
  // again when a recomputed kernel replays in backward), so a consumer keeps the running max.
  std::function<void(const torch::Tensor&)> observe_logit_max = {};

  bool has_sinks() const { return sinks.defined(); }
  // The scale for q's head dim `dim`.
  double softmax_scale(int64_t dim) const;
  // Throws unless window >= 0 and sinks, when given, are 1-D with `heads` entries.
  void check(int64_t heads) const;
};

// Causal scaled dot-product attention. q: [B, H, T, D]; k: [B, KV, T, D]; v: [B, KV, T, Dv] with H
// a multiple of KV (kv head j serves query heads j*H/KV .. (j+1)*H/KV - 1). Softmax runs in fp32.
// cu_seqlens, when defined, packs several documents into the sequence (see document_ids) and
// restricts each query to the keys of its own document. This is the eager reference: the
// scores are q k^T times the scale (transformers' order), the sink column joins the softmax.
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& cu_seqlens = {}, const AttentionVariant& variant = {});

// Attention of q [B, H, T, D] over keys k [B, KV, S, D] and values v [B, KV, S, Dv] where
// `hidden` (bool, broadcastable to [B, H, T, S]) marks the keys a query must not see, each query
// seeing at least one; eager, in causal_attention's order of operations.
torch::Tensor masked_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& hidden, const AttentionVariant& variant = {});

// Validates cu_seqlens, the cumulative document lengths [0, l1, l1 + l2, ..., seq] of a packed
// sequence (shared by every batch row; empty documents allowed), and returns the document index
// of each position: int64 [seq].
torch::Tensor document_ids(const torch::Tensor& cu_seqlens, int64_t seq);

class AttentionImpl : public AttentionLayer {
 public:
  // layer: its index, which decides its window (ModelConfig::window_of).
  AttentionImpl(const ModelConfig& config, const AttentionFeatures& features, int64_t layer = 0);
  // x: [B, T, hidden]; rotary tables cover every position of the layout (T when not packed).
  // With `cache` set, x holds only the new tokens of the cache's rows (tensor parallelism refused).
  torch::Tensor forward(const torch::Tensor& x, const RotaryTables& rotary, const SequenceLayout& layout = {}) override;
  // q, k and v ~ N(0, std^2), their biases 0; o_proj, which writes into the residual stream,
  // ~ N(0, output_std^2); the q and k norm gains 1.
  void describe_init(const std::string& name, double std, double output_std, InitPlan& plan) const override;
  // The fused rotation, and the q and k norms' kernels.
  void set_fused_kernels(bool fused) override;
  void float8_layers(const std::string& name, Float8Layers& layers) override;  // q, k, v and o
  bool reads_kv_cache() const override { return true; }

  // QK-clip (model/attention/attention_layer.h): only the eager kernel reports the logits.
  std::string qk_clip_refusal() const override;
  void record_logit_max(bool on) override { record_logit_max_ = on; }
  torch::Tensor take_logit_max() override;
  int64_t num_heads() const override { return num_heads_; }
  int64_t num_kv_heads() const override { return num_kv_heads_; }
  int64_t head_dim() const { return head_dim_; }

  Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  RMSNorm q_norm{nullptr}, k_norm{nullptr};  // qwen3 only
  bool fused_rotary = false;  // q and k rotated by model/kernels/fused_rotary.h where it applies

  // The rows of each projection that rank `rank` of `ranks` holds, by parameter name relative to
  // this module (model/layers/tensor_parallel_ops.h); replicated ones are absent.
  TensorParallelPlan tensor_parallel_plan(int64_t rank, int64_t ranks) const override;
  void use_tensor_parallel(std::shared_ptr<TensorParallelOps> ops) override;

 protected:
  // What this layer's softmax adds to plain causal attention: its window (GPT-OSS's layers add
  // their sinks, model/gpt_oss/sink_attention.h).
  virtual AttentionVariant variant() const;

 private:
  torch::Tensor key_value(const Linear& projection, const torch::Tensor& x) const;
  // q and k [B, heads, T, D] rotated to their tokens' positions, q's moved on by query_shift.
  std::pair<torch::Tensor, torch::Tensor> rotate(const torch::Tensor& q, const torch::Tensor& k,
                                                 const RotaryTables& rotary, const SequenceLayout& layout,
                                                 int64_t query_shift) const;

  // forward with `cache` set: q and k rotated to the cache's positions, k and v appended to it.
  torch::Tensor cached_forward(const torch::Tensor& x, const RotaryTables& rotary);
  torch::Tensor output(const torch::Tensor& attended);  // o_proj, its bias once over the tensor-parallel ranks
  int64_t num_heads_, num_kv_heads_, head_dim_, window_;
  std::shared_ptr<TensorParallelOps> tensor_parallel_;
  int64_t replicated_kv_head_ = -1;  // fewer kv heads than ranks: the one this rank reads
  bool record_logit_max_ = false;
  torch::Tensor logit_max_;  // [heads] since the last take, or undefined: none seen
};
TORCH_MODULE(Attention);

}  // namespace xtrain::model

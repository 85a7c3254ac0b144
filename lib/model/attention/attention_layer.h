// What a decoder layer needs of its self-attention, whichever kind its family builds: grouped-
// query attention (model/attention/attention.h), GPT-OSS's with sinks (model/gpt_oss/), or
// DeepSeek's latent attention (model/deepseek/latent_attention.h). Registered as "self_attn".
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <torch/nn/module.h>

#include "model/attention/kv_cache.h"
#include "model/layers/float8_user.h"
#include "model/layers/fused_kernel_user.h"
#include "model/layers/parameter_init.h"
#include "model/layers/rotary.h"
#include "model/layers/sequence_layout.h"
#include "model/layers/tensor_parallel_ops.h"

namespace xtrain::model {

struct AttentionVariant;

// The attention kernel a layer calls with rotated q, k and v, the row's layout (its cu_seqlens
// undefined for one causal sequence) and the layer's variant. Memory policies swap it (for a
// blockwise kernel, or to recompute it in backward), context parallelism for one that sees the
// whole row.
using AttentionKernel =
    std::function<torch::Tensor(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const SequenceLayout& layout, const AttentionVariant& variant)>;

class AttentionLayer : public torch::nn::Module, public FusedKernelUser, public Float8User {
 public:
  // x: [B, T, hidden]; the rotary tables cover every position of the layout (T when not packed).
  virtual torch::Tensor forward(const torch::Tensor& x, const RotaryTables& rotary, const SequenceLayout& layout) = 0;
  // The projections ~ N(0, std^2), the one that writes into the residual stream (o_proj)
  // ~ N(0, output_std^2), norm gains 1.
  virtual void describe_init(const std::string& name, double std, double output_std, InitPlan& plan) const = 0;
  // The rows of each parameter that rank `rank` of `ranks` holds, by name relative to this
  // module (model/layers/tensor_parallel_ops.h), and installing the group's ops once sliced.
  virtual TensorParallelPlan tensor_parallel_plan(int64_t rank, int64_t ranks) const = 0;
  virtual void use_tensor_parallel(std::shared_ptr<TensorParallelOps> ops) = 0;
  // Every projection (the family's own: model/layers/float8_user.h).
  void float8_layers(const std::string& name, Float8Layers& layers) override = 0;
  // The kernel slot (empty: the eager causal_attention).
  AttentionKernel kernel;
  // Whether forward reads `cache` (model/attention/kv_cache.h); a layer that does not leaves it unset.
  virtual bool reads_kv_cache() const { return false; }

  // QK-clip (optim.muon.qk_clip_tau, train/qk_clip_layers.h) scales a layer's q and k projections
  // by what its heads' logits reach. qk_clip_refusal: why this layer cannot be clipped, or ""
  // (grouped-query attention without q/k norms). While recording, each training forward keeps the
  // largest logit of each of this rank's query heads since the last take_logit_max(), which
  // returns it ([heads] fp32, -inf for a head that saw no query) and starts over.
  virtual std::string qk_clip_refusal() const { return "not grouped-query attention"; }
  virtual void record_logit_max(bool) {}
  virtual torch::Tensor take_logit_max() { return {}; }
  // The query and key/value heads of the whole layer (every tensor-parallel rank's).
  virtual int64_t num_heads() const = 0;
  virtual int64_t num_kv_heads() const = 0;
  // Set by the model for the forwards of a batch that carries a KvCache: forward then takes only
  // the new tokens, at the cache's positions, and attends over the cached keys too (the kernel
  // slot and the layout unused).
  KvCacheSlot cache;
};

}  // namespace xtrain::model

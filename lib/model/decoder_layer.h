// A decoder layer of the Llama-style families: RMSNorm -> self-attention -> residual, RMSNorm ->
// feed-forward (SwiGLU, or a mixture of experts) -> residual. What differs between families is
// built by their DecoderParts (torchtitan keeps a model's blocks in models/<name>/ the same way):
// Llama's grouped-query attention and experts (llama_decoder_parts), DeepSeek's latent attention
// (model/deepseek/deepseek_decoder.h), GPT-OSS's sinks and clamped experts
// (model/gpt_oss/gpt_oss_decoder.h). family_decoder_parts picks them from the spec's features.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "model/attention/attention_layer.h"
#include "model/layers/float8_user.h"
#include "model/layers/fused_kernel_user.h"
#include "model/layers/moe.h"
#include "model/layers/parameter_init.h"
#include "model/layers/rms_norm.h"
#include "model/layers/swiglu.h"
#include "model/spec/attention_features.h"
#include "model/spec/model_config.h"

namespace xtrain::model {

// What a family builds its decoder layers from.
struct DecoderParts {
  // Layer `layer`'s self-attention (registered as self_attn).
  std::function<std::shared_ptr<AttentionLayer>(const ModelConfig& config, int64_t layer)> attention;
  // A MoE layer's feed-forward (registered as mlp).
  std::function<MoeBlock(const ModelConfig& config)> experts;
};

// The experts of the config (the family's own activation aside).
MoeOptions moe_options(const ModelConfig& config);
// Llama's (llama, qwen2, qwen3, qwen3_moe, ...): grouped-query attention with the family's
// features, SwiGLU experts.
DecoderParts llama_decoder_parts(const AttentionFeatures& features);
// The parts of the family whose spec has these features and whose model has this shape.
DecoderParts family_decoder_parts(const ModelConfig& config, const AttentionFeatures& features);

class DecoderLayerImpl : public torch::nn::Module, public FusedKernelUser, public Float8User {
 public:
  // layer: its index, which decides whether its feed-forward is dense or MoE.
  DecoderLayerImpl(const ModelConfig& config, const DecoderParts& parts, int64_t layer = 0);
  // The layer of the family with these features (family_decoder_parts).
  DecoderLayerImpl(const ModelConfig& config, const AttentionFeatures& features, int64_t layer = 0);
  // loss_weight: the batch's (Batch::loss_weight), which a MoE layer's router losses take as
  // their gradient weight inside this layer's backward (model/layers/aux_loss.h).
  // balance_coefficients: when the balancing loss is deferred (transformers' scope, or the global
  // average), the [E] gradient of it with respect to this layer's summed router probabilities,
  // filled in by the model after its forward (model/layers/aux_loss.h); undefined otherwise.
  torch::Tensor forward(const torch::Tensor& x, const RotaryTables& rotary, const SequenceLayout& layout = {},
                        double loss_weight = 1.0, const torch::Tensor& balance_coefficients = {});
  virtual void describe_init(const std::string& name, double std, double output_std, InitPlan& plan) const;
  void set_fused_kernels(bool fused) override;
  // The attention's and the feed-forward's.
  void float8_layers(const std::string& name, Float8Layers& layers) override;

  RMSNorm input_layernorm{nullptr};
  std::shared_ptr<AttentionLayer> self_attn;  // the family's attention
  AttentionKernel& attention_kernel() { return self_attn->kernel; }
  RMSNorm post_attention_layernorm{nullptr};
  SwiGLU mlp{nullptr};  // a dense layer's feed-forward, registered as "mlp"
  MoeBlock moe{nullptr};  // a MoE layer's, registered as "mlp" instead
  // What a MoE layer reports of a forward, detached, for the log and the expert bias.
  struct RoutingReport {
    torch::Tensor balance, z;  // its share of each router loss (undefined when its coefficient is 0)
    torch::Tensor load;        // [E] tokens routed to each expert
    torch::Tensor prob_sums;   // [E] router probabilities summed over the tokens
    double tokens = 0;
    double dropped = 0;
  };
  // While set (during the model's forward, not during a recompute's replay), a MoE layer writes
  // its report here.
  RoutingReport* report = nullptr;

 private:
  // Each router loss's coefficient over the number of MoE layers (their mean), and top k.
  double balance_coef_ = 0, z_coef_ = 0;
  int64_t top_k_ = 0;
};
TORCH_MODULE(DecoderLayer);

}  // namespace xtrain::model

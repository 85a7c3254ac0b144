#include "model/decoder_layer.h"

#include <torch/torch.h>

#include "model/attention/attention.h"
#include "model/deepseek/deepseek_decoder.h"
#include "model/gpt_oss/gpt_oss_decoder.h"
#include "model/layers/aux_loss.h"

namespace xtrain::model {

MoeOptions moe_options(const ModelConfig& config) {
  MoeOptions options;
  options.hidden_size = config.hidden_size;
  options.num_experts = config.num_experts;
  options.top_k = config.num_experts_per_tok;
  options.intermediate_size = config.moe_intermediate_size;
  options.norm_topk_prob = config.norm_topk_prob;
  options.router = config.router;
  options.n_group = config.n_group;
  options.topk_group = config.topk_group;
  options.routed_scaling_factor = config.routed_scaling_factor;
  options.num_shared_experts = config.num_shared_experts;
  options.shared_expert_gate = config.shared_expert_gate;
  options.capacity_factor = config.capacity_factor;
  options.drop_policy = config.drop_policy;
  return options;
}

DecoderParts llama_decoder_parts(const AttentionFeatures& features) {
  DecoderParts parts;
  parts.attention = [features](const ModelConfig& config, int64_t layer) -> std::shared_ptr<AttentionLayer> {
    return Attention(config, features, layer).ptr();
  };
  parts.experts = [](const ModelConfig& config) { return MoeBlock(moe_options(config)); };
  return parts;
}

DecoderParts family_decoder_parts(const ModelConfig& config, const AttentionFeatures& features) {
  if (config.latent.enabled()) return deepseek_decoder_parts(features);
  if (features.sinks || features.gpt_oss_experts) return gpt_oss_decoder_parts(features);
  return llama_decoder_parts(features);
}

DecoderLayerImpl::DecoderLayerImpl(const ModelConfig& config, const AttentionFeatures& features, int64_t layer)
    : DecoderLayerImpl(config, family_decoder_parts(config, features), layer) {}

DecoderLayerImpl::DecoderLayerImpl(const ModelConfig& config, const DecoderParts& parts, int64_t layer) {
  input_layernorm = register_module("input_layernorm", RMSNorm(config.hidden_size, config.norm_eps));
  self_attn = register_module("self_attn", parts.attention(config, layer));
  post_attention_layernorm =
      register_module("post_attention_layernorm", RMSNorm(config.hidden_size, config.norm_eps));
  if (config.is_moe_layer(layer)) {
    moe = register_module("mlp", parts.experts(config));
    const auto moe_layers = static_cast<double>(config.num_moe_layers());
    balance_coef_ = config.router_aux_loss_coef / moe_layers;
    z_coef_ = config.router_z_loss_coef / moe_layers;
    top_k_ = config.num_experts_per_tok;
  } else
    mlp = register_module("mlp", SwiGLU(config.hidden_size, config.intermediate_size));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const RotaryTables& rotary,
                                        const SequenceLayout& layout, double loss_weight,
                                        const torch::Tensor& balance_coefficients) {
  const auto attended = self_attn->forward(input_layernorm(x), rotary, layout);
  const auto [h, normed] = post_attention_layernorm->add_and_forward(x, attended);
  if (!moe) return h + mlp(normed);
  Routing routing;
  auto out = h + moe(normed, &routing);
  const auto stats = routing_stats(routing);
  if (report) *report = {{}, {}, stats.counts.detach(), stats.prob_sums.detach(), stats.tokens, stats.dropped};
  torch::Tensor losses;  // this layer's own share of the router losses
  if (balance_coef_ > 0 && balance_coefficients.defined()) {
    out = attach_loss_terms(out, stats.prob_sums, balance_coefficients, loss_weight);
  } else if (balance_coef_ > 0) {
    losses = load_balancing_loss(stats, top_k_) * balance_coef_;
    if (report) report->balance = losses.detach();
  }
  if (z_coef_ > 0) {
    const auto z = router_z_loss(stats) * z_coef_;
    if (report) report->z = z.detach();
    losses = losses.defined() ? losses + z : z;
  }
  return losses.defined() ? attach_loss(out, losses, loss_weight) : out;
}

void DecoderLayerImpl::describe_init(const std::string& name, double std, double output_std, InitPlan& plan) const {
  input_layernorm->describe_init(name + ".input_layernorm", plan);
  self_attn->describe_init(name + ".self_attn", std, output_std, plan);
  post_attention_layernorm->describe_init(name + ".post_attention_layernorm", plan);
  if (moe)
    moe->describe_init(name + ".mlp", std, output_std, plan);
  else
    mlp->describe_init(name + ".mlp", std, output_std, plan);
}

void DecoderLayerImpl::set_fused_kernels(bool fused) {
  input_layernorm->set_fused_kernels(fused);
  self_attn->set_fused_kernels(fused);
  post_attention_layernorm->set_fused_kernels(fused);
  if (moe)
    moe->set_fused_kernels(fused);
  else
    mlp->set_fused_kernels(fused);
}

void DecoderLayerImpl::float8_layers(const std::string& name, Float8Layers& layers) {
  self_attn->float8_layers(module_name(name, "self_attn"), layers);
  if (moe)
    moe->float8_layers(module_name(name, "mlp"), layers);
  else
    mlp->float8_layers(module_name(name, "mlp"), layers);
}

}  // namespace xtrain::model

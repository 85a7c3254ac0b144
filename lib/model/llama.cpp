#include "model/llama.h"

#include <cmath>

#include <torch/torch.h>

namespace xtrain::model {

DecoderLayerImpl::DecoderLayerImpl(const LlamaConfig& config) {
  input_layernorm = register_module("input_layernorm", RMSNorm(config.hidden_size, config.norm_eps));
  self_attn = register_module("self_attn", Attention(config));
  post_attention_layernorm =
      register_module("post_attention_layernorm", RMSNorm(config.hidden_size, config.norm_eps));
  mlp = register_module("mlp", SwiGLU(config.hidden_size, config.intermediate_size));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const RotaryTables& rotary,
                                        const SequenceLayout& layout) {
  auto h = x + self_attn(input_layernorm(x), rotary, layout);
  return h + mlp(post_attention_layernorm(h));
}

LlamaBodyImpl::LlamaBodyImpl(const LlamaConfig& config)
    : config_(config), rotary_(rotary_tables(config.max_seq_len, config.head_dim(), config.rope_theta, config.rope_scaling)) {
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(config.vocab_size, config.hidden_size));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.num_layers; ++i) layers->push_back(DecoderLayer(config));
  norm = register_module("norm", RMSNorm(config.hidden_size, config.norm_eps));
  // Buffers, so that the tables follow the module to its device (to() updates them in place).
  register_buffer("rotary_cos", rotary_.cos);
  register_buffer("rotary_sin", rotary_.sin);
}

torch::Tensor LlamaBodyImpl::forward(const torch::Tensor& input_ids, const SequenceLayout& layout) {
  const int64_t longest = layout.packed() ? layout.longest : input_ids.size(1);
  TORCH_CHECK(longest <= config_.max_seq_len, "sequence of ", longest, " tokens exceeds model.max_seq_len ",
              config_.max_seq_len);
  auto embed = [this](const torch::Tensor& ids) { return embed_tokens(ids); };
  auto x = embed_runner ? embed_runner(input_ids, embed) : embed(input_ids);
  for (size_t i = 0; i < layers->size(); ++i) {
    auto* layer = (*layers)[i]->as<DecoderLayer>();
    // Captures by value: a recompute policy keeps this callable until backward.
    auto block = [this, layer, layout](const torch::Tensor& input) { return layer->forward(input, rotary_, layout); };
    x = block_runner ? block_runner(static_cast<int64_t>(i), x, block) : block(x);
  }
  return norm(x);
}

LlamaForCausalLMImpl::LlamaForCausalLMImpl(const LlamaConfig& config) : config_(config) {
  model = register_module("model", LlamaBody(config));
  if (!config.tie_embeddings)
    lm_head = register_module(
        "lm_head", torch::nn::Linear(torch::nn::LinearOptions(config.hidden_size, config.vocab_size).bias(false)));
  init_weights();
}

torch::Tensor LlamaForCausalLMImpl::output_weight() const {
  return lm_head ? lm_head->weight : model->embed_tokens->weight;
}

torch::Tensor LlamaForCausalLMImpl::forward(const torch::Tensor& input_ids, const SequenceLayout& layout) {
  return torch::nn::functional::linear(model(input_ids, layout), output_weight());
}

void DecoderLayerImpl::init_weights(double std, double output_std) {
  input_layernorm->reset_parameters();
  self_attn->init_weights(std, output_std);
  post_attention_layernorm->reset_parameters();
  mlp->init_weights(std, output_std);
}

void LlamaForCausalLMImpl::init_weights() {
  torch::NoGradGuard no_grad;
  const double std = config_.init_std;
  const double output_std = std / std::sqrt(2.0 * config_.num_layers);
  model->embed_tokens->weight.normal_(0.0, std);
  for (const auto& layer : *model->layers) layer->as<DecoderLayer>()->init_weights(std, output_std);
  model->norm->reset_parameters();
  if (lm_head) lm_head->weight.normal_(0.0, std);
}

namespace {
ShardPlan::Unit unit_of(const std::string& name, const torch::nn::Module& module) {
  ShardPlan::Unit unit{name, {}};
  for (const auto& item : module.named_parameters()) unit.parameters.emplace_back(name + "." + item.key(), item.value());
  return unit;
}
}  // namespace

ShardPlan LlamaForCausalLMImpl::shard_plan() {
  ShardPlan plan;
  if (!config_.tie_embeddings) plan.embedding = unit_of("model.embed_tokens", *model->embed_tokens);
  for (size_t i = 0; i < model->layers->size(); ++i)
    plan.blocks.push_back(unit_of("model.layers." + std::to_string(i), *(*model->layers)[i]));
  plan.head = unit_of("model.norm", *model->norm);
  plan.head.name = config_.tie_embeddings ? "root" : "head";
  if (config_.tie_embeddings)
    plan.head.parameters.insert(plan.head.parameters.begin(), {"model.embed_tokens.weight", model->embed_tokens->weight});
  else
    plan.head.parameters.emplace_back("lm_head.weight", lm_head->weight);
  return plan;
}

int64_t LlamaForCausalLMImpl::num_parameters() const {
  int64_t total = 0;
  for (const auto& p : parameters()) total += p.numel();
  return total;
}

torch::Tensor next_token_loss(LlamaForCausalLM& model, const torch::Tensor& tokens) {
  const int64_t seq = tokens.size(1) - 1;
  auto inputs = tokens.narrow(1, 0, seq);
  auto targets = tokens.narrow(1, 1, seq);
  auto logits = model(inputs);
  auto wide = logits.to(at::promote_types(logits.scalar_type(), torch::kFloat32));
  return torch::nn::functional::cross_entropy(wide.reshape({-1, wide.size(-1)}), targets.reshape({-1}));
}

bool decays(const std::string& /*parameter_name*/, const torch::Tensor& parameter) {
  return parameter.dim() >= 2;
}

}  // namespace xtrain::model

#include "model/llama.h"

#include <cmath>

#include <torch/torch.h>

namespace xtrain::model {

DecoderLayerImpl::DecoderLayerImpl(const ModelConfig& config, const AttentionFeatures& features) {
  input_layernorm = register_module("input_layernorm", RMSNorm(config.hidden_size, config.norm_eps));
  self_attn = register_module("self_attn", Attention(config, features));
  post_attention_layernorm =
      register_module("post_attention_layernorm", RMSNorm(config.hidden_size, config.norm_eps));
  mlp = register_module("mlp", SwiGLU(config.hidden_size, config.intermediate_size));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const RotaryTables& rotary,
                                        const SequenceLayout& layout) {
  auto h = x + self_attn(input_layernorm(x), rotary, layout);
  return h + mlp(post_attention_layernorm(h));
}

LlamaBodyImpl::LlamaBodyImpl(const ModelConfig& config, const AttentionFeatures& features)
    : config_(config), rotary_(rotary_tables(config.max_seq_len, config.head_dim(), config.rope_theta, config.rope_scaling)) {
  embed_tokens = register_module("embed_tokens", Embedding(config.vocab_size, config.hidden_size));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.num_layers; ++i) layers->push_back(DecoderLayer(config, features));
  norm = register_module("norm", RMSNorm(config.hidden_size, config.norm_eps));
  // Buffers, so that the tables follow the module to its device (to() updates them in place).
  register_buffer("rotary_cos", rotary_.cos);
  register_buffer("rotary_sin", rotary_.sin);
}

torch::Tensor LlamaBodyImpl::forward(const torch::Tensor& input_ids, const SequenceLayout& layout,
                                     const BlockRunner& block_runner, const EmbedRunner& embed_runner) {
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

LlamaForCausalLM::LlamaForCausalLM(const ModelConfig& config, const AttentionFeatures& features)
    : CausalLM(config) {
  model = register_module("model", LlamaBody(config, features));
  if (!config.tie_embeddings)
    lm_head = register_module("lm_head", Linear(config.hidden_size, config.vocab_size, false));
}

torch::Tensor LlamaForCausalLM::output_weight() const {
  return lm_head ? lm_head->weight : model->embed_tokens->weight;
}

ModelOutput LlamaForCausalLM::forward(const Batch& batch) {
  return {model(batch.input_ids, batch.layout, block_runner, embed_runner), {}};
}

std::vector<AttentionKernel*> LlamaForCausalLM::attention_kernels() {
  std::vector<AttentionKernel*> kernels;
  for (const auto& layer : *model->layers) kernels.push_back(&layer->as<DecoderLayer>()->self_attn->kernel);
  return kernels;
}

void DecoderLayerImpl::describe_init(const std::string& name, double std, double output_std, InitPlan& plan) const {
  input_layernorm->describe_init(name + ".input_layernorm", plan);
  self_attn->describe_init(name + ".self_attn", std, output_std, plan);
  post_attention_layernorm->describe_init(name + ".post_attention_layernorm", plan);
  mlp->describe_init(name + ".mlp", std, output_std, plan);
}

InitPlan LlamaForCausalLM::init_plan() const {
  const double std = config().init_std;
  const double output_std = std / std::sqrt(2.0 * config().num_layers);
  InitPlan plan;
  model->embed_tokens->describe_init("model.embed_tokens", std, plan);
  for (size_t i = 0; i < model->layers->size(); ++i)
    (*model->layers)[i]->as<DecoderLayer>()->describe_init("model.layers." + std::to_string(i), std, output_std, plan);
  model->norm->describe_init("model.norm", plan);
  if (lm_head) lm_head->describe_init("lm_head", std, plan);
  return plan;
}

namespace {
ShardPlan::Unit unit_of(const std::string& name, const torch::nn::Module& module) {
  ShardPlan::Unit unit{name, {}, "fsdp", "dp"};
  for (const auto& item : module.named_parameters()) unit.parameters.emplace_back(name + "." + item.key(), item.value());
  return unit;
}
}  // namespace

ShardPlan LlamaForCausalLM::shard_plan() {
  ShardPlan plan;
  const bool tied = config().tie_embeddings;
  if (!tied) plan.embedding = unit_of("model.embed_tokens", *model->embed_tokens);
  for (size_t i = 0; i < model->layers->size(); ++i)
    plan.blocks.push_back(unit_of("model.layers." + std::to_string(i), *(*model->layers)[i]));
  plan.head = unit_of("model.norm", *model->norm);
  plan.head.name = tied ? "root" : "head";
  if (tied)
    plan.head.parameters.insert(plan.head.parameters.begin(), {"model.embed_tokens.weight", model->embed_tokens->weight});
  else
    plan.head.parameters.emplace_back("lm_head.weight", lm_head->weight);
  return plan;
}

}  // namespace xtrain::model

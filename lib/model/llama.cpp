#include "model/llama.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <torch/torch.h>

#include "model/attention/kv_cache.h"
#include "model/moe_routing.h"

namespace xtrain::model {

LlamaBodyImpl::LlamaBodyImpl(const ModelConfig& config, const DecoderParts& parts)
    : config_(config), rotary_(rotary_tables(config.max_seq_len, config.rotary_dim(), config.rope_theta, config.rope_scaling)) {
  embed_tokens = register_module("embed_tokens", Embedding(config.vocab_size, config.hidden_size));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.num_layers; ++i) append_layer(DecoderLayer(config, parts, i).ptr());
  norm = register_module("norm", RMSNorm(config.hidden_size, config.norm_eps));
  // Buffers, so that the tables follow the module to its device (to() updates them in place).
  register_buffer("rotary_cos", rotary_.cos);
  register_buffer("rotary_sin", rotary_.sin);
}

void LlamaBodyImpl::append_layer(std::shared_ptr<DecoderLayerImpl> layer) {
  layers->push_back(layer);
  blocks.push_back(std::move(layer));
}

torch::Tensor LlamaBodyImpl::forward(const torch::Tensor& input_ids, const SequenceLayout& layout,
                                     const BlockRunner& block_runner, const EmbedRunner& embed_runner,
                                     double loss_weight, const torch::Tensor& balance_coefficients) {
  check_length(input_ids, layout);
  const auto x = embed(input_ids, embed_runner);
  return norm(run_layers(x, layout, block_runner, 0, config_.num_layers, loss_weight, balance_coefficients));
}

void LlamaBodyImpl::check_length(const torch::Tensor& input_ids, const SequenceLayout& layout) const {
  if (caching_) return;  // the cache checks each row's positions
  const int64_t longest = layout.longest > 0 ? layout.longest : input_ids.size(1);
  TORCH_CHECK(longest <= config_.max_seq_len, "sequence of ", longest, " tokens exceeds model.max_seq_len ",
              config_.max_seq_len);
}

torch::Tensor LlamaBodyImpl::embed(const torch::Tensor& input_ids, const EmbedRunner& embed_runner) {
  auto lookup = [this](const torch::Tensor& ids) { return embed_tokens(ids); };
  return embed_runner ? embed_runner(input_ids, lookup) : lookup(input_ids);
}

torch::Tensor LlamaBodyImpl::run_layers(torch::Tensor x, const SequenceLayout& layout, const BlockRunner& block_runner,
                                        int64_t first, int64_t last, double loss_weight,
                                        const torch::Tensor& balance_coefficients) {
  for (int64_t i = first; i < last; ++i) {
    auto* layer = blocks[static_cast<size_t>(i)].get();
    // Captures by value: a recompute policy keeps this callable until backward.
    const auto coefficients = balance_coefficients.defined() ? balance_coefficients[i] : torch::Tensor();
    auto block = [this, layer, layout, loss_weight, coefficients](const torch::Tensor& input) {
      return layer->forward(input, rotary_, layout, loss_weight, coefficients);
    };
    x = block_runner ? block_runner(i, x, block) : block(x);
  }
  return x;
}

LlamaForCausalLM::LlamaForCausalLM(const ModelConfig& config, const AttentionFeatures& features)
    : CausalLM(config) {
  const auto parts = family_decoder_parts(config, features);
  model = register_module("model", LlamaBody(config, parts));
  if (config.mtp_layers > 0) mtp_ = std::make_unique<MultiTokenPrediction>(config, parts, *model);
  if (!config.tie_embeddings)
    lm_head = register_module("lm_head", Linear(config.hidden_size, config.vocab_size, false));
}

torch::Tensor LlamaForCausalLM::output_weight() const {
  return lm_head ? lm_head->weight : model->embed_tokens->weight;
}

// The layers report their routing while their reports are set (model/moe_routing.h).
bool LlamaForCausalLM::reads_kv_cache() const {
  if (mtp_) return false;
  for (const auto& layer : model->blocks)
    if (!layer->self_attn->reads_kv_cache()) return false;
  return true;
}

ModelOutput LlamaForCausalLM::forward(const Batch& batch) {
  *adapter_dropout_key_ = batch.dropout;
  if (batch.kv_cache) return cached_forward(batch);
  const auto& c = config();
  const auto coefficients = balance_deferred(c, static_cast<bool>(sum_over_context_ranks))
                                ? torch::zeros({static_cast<int64_t>(model->blocks.size()), c.num_experts},
                                               torch::TensorOptions().device(batch.input_ids.device()))
                                : torch::Tensor();
  std::vector<RoutingReport> reports(model->blocks.size());
  for (size_t i = 0; i < reports.size(); ++i) model->blocks[i]->report = &reports[i];
  ModelOutput output;
  if (mtp_)
    mtp_->forward(*model, batch, block_runner, embed_runner, coefficients, output);
  else
    output.hidden = model(batch.input_ids, batch.layout, block_runner, embed_runner, batch.loss_weight, coefficients);
  // The vocabulary-parallel head takes the whole sequence on every rank.
  if (tensor_parallel_) {
    output.hidden = tensor_parallel_->enter(output.hidden);
    for (auto& depth : output.mtp_hidden) depth = tensor_parallel_->enter(depth);
  }
  for (const auto& layer : model->blocks) layer->report = nullptr;
  if (c.num_experts > 0)
    collect_routing(c, reports, coefficients, sum_over_data_ranks, sum_over_context_ranks, output);
  return output;
}

// Each layer's attention reads its slot of the cache for this forward only.
ModelOutput LlamaForCausalLM::cached_forward(const Batch& batch) {
  TORCH_CHECK(reads_kv_cache(), "the ", config().family, " model has no key/value cache: its attention or its "
              "prediction depths do not read one");
  auto& cache = *batch.kv_cache;
  TORCH_CHECK(cache.layers() == static_cast<int64_t>(model->blocks.size()), "a key/value cache of ", cache.layers(),
              " layers for a model of ", model->blocks.size());
  for (size_t i = 0; i < model->blocks.size(); ++i) model->blocks[i]->self_attn->cache = {&cache, static_cast<int64_t>(i)};
  struct Unset {
    LlamaForCausalLM& self;
    ~Unset() {
      for (const auto& layer : self.model->blocks) layer->self_attn->cache = {};
      self.model->caching_ = false;
    }
  } unset{*this};
  model->caching_ = true;
  ModelOutput output;
  output.hidden = model(batch.input_ids, batch.layout, block_runner, embed_runner, batch.loss_weight, torch::Tensor());
  return output;
}

ModelOutput LlamaForCausalLM::forward_chunk(const Batch& batch, const torch::Tensor& hidden, int64_t first_layer,
                                            int64_t last_layer, bool embed, bool head) {
  const auto& c = config();
  TORCH_CHECK(!(c.num_experts > 0 && c.router_aux_loss_coef > 0 &&
                (c.router_aux_loss_scope == AuxLossScope::model || c.router_aux_loss_global_average)),
              "a pipeline chunk cannot defer the balancing loss over every layer or the global batch: the recipe "
              "check refuses model.router_aux_loss_scope model and router_aux_loss_global_average with parallel.pp");
  TORCH_CHECK(!head || !mtp_ || last_layer == static_cast<int64_t>(model->blocks.size()),
              "the head chunk runs the prediction depths, layers ", c.num_layers, " to ", model->blocks.size() - 1);
  std::vector<RoutingReport> reports(static_cast<size_t>(last_layer - first_layer));
  const auto chunk = model->blocks.begin() + first_layer;
  for (size_t i = 0; i < reports.size(); ++i) chunk[static_cast<int64_t>(i)]->report = &reports[i];
  // Only context parallelism defers the balancing loss here (the recipe check refuses the rest).
  const auto coefficients = balance_deferred(c, static_cast<bool>(sum_over_context_ranks))
                                ? torch::zeros({static_cast<int64_t>(model->blocks.size()), c.num_experts},
                                               torch::TensorOptions().device(batch.input_ids.device()))
                                : torch::Tensor();
  auto x = embed ? model->embed(batch.input_ids, embed_runner) : hidden;
  x = model->run_layers(x, batch.layout, block_runner, first_layer, std::min(last_layer, c.num_layers),
                        batch.loss_weight, coefficients);
  ModelOutput output;
  if (head) {
    x = model->norm(x);
    if (mtp_) output.mtp_hidden = mtp_->forward_after(*model, batch, block_runner, embed_runner, x, coefficients);
  }
  for (size_t i = 0; i < reports.size(); ++i) chunk[static_cast<int64_t>(i)]->report = nullptr;
  if (c.num_experts > 0)
    chunk_routing(c, reports, first_layer, coefficients, sum_over_context_ranks, batch.input_ids.device(), output);
  if (head && tensor_parallel_) {
    x = tensor_parallel_->enter(x);
    for (auto& depth : output.mtp_hidden) depth = tensor_parallel_->enter(depth);
  }
  output.hidden = x;
  return output;
}

// Mixtures of experts: the experts split over the ranks by expert (model/layers/moe.h), the router
// replicated, shared experts as a dense MLP.
TensorParallelPlan LlamaForCausalLM::tensor_parallel_plan(int64_t rank, int64_t ranks) const {
  const auto& c = config();
  TensorParallelPlan plan;
  const auto vocab = TensorSlice{0, split_share(c.vocab_size, rank, ranks)};
  plan["model.embed_tokens.weight"] = vocab;
  if (lm_head) plan["lm_head.weight"] = vocab;
  auto split = [ranks](int64_t size, const char* key) {
    if (size % ranks != 0)
      throw std::invalid_argument(
          fmt::format("{} {} does not split over {} tensor-parallel ranks (parallel.tp)", key, size, ranks));
  };
  for (size_t i = 0; i < model->blocks.size(); ++i) {
    const auto prefix = "model.layers." + std::to_string(i) + ".";
    const auto& layer = *model->blocks[i];
    for (const auto& [name, slice] : layer.self_attn->tensor_parallel_plan(rank, ranks))
      plan[prefix + "self_attn." + name] = slice;
    auto mlp = [&](const std::string& name, int64_t width) {
      const auto share = split_share(width, rank, ranks);
      plan[prefix + name + ".gate_proj.weight"] = {0, share};
      plan[prefix + name + ".up_proj.weight"] = {0, share};
      plan[prefix + name + ".down_proj.weight"] = {1, share};
    };
    if (!layer.moe) {
      split(c.intermediate_size, "model.intermediate_size");
      mlp("mlp", c.intermediate_size);
      continue;
    }
    split(c.num_experts, "model.num_experts");
    const auto experts = TensorSlice{0, split_share(c.num_experts, rank, ranks)};
    for (const auto& [name, weight] : layer.moe->expert_weights()) plan[prefix + "mlp." + name] = experts;
    if (layer.moe->shared_experts) {
      split(c.moe_intermediate_size * c.num_shared_experts, "model.moe_intermediate_size x num_shared_experts");
      mlp("mlp.shared_experts", c.moe_intermediate_size * c.num_shared_experts);
    }
  }
  return plan;
}

void LlamaForCausalLM::use_tensor_parallel(std::shared_ptr<TensorParallelOps> ops) {
  model->embed_tokens->split_vocabulary(ops, config().vocab_size);
  // With sequence parallelism the norms see this rank's part of the sequence.
  const auto partial = ops->sequence_parallel() ? ops : nullptr;
  for (const auto& block : model->blocks) {
    auto& layer = *block;
    layer.self_attn->use_tensor_parallel(ops);
    if (layer.moe)
      layer.moe->use_tensor_parallel(ops);
    else
      layer.mlp->tensor_parallel = ops;
    layer.input_layernorm->partial_gradient = partial;
    layer.post_attention_layernorm->partial_gradient = partial;
  }
  model->norm->partial_gradient = partial;
  if (mtp_) mtp_->use_tensor_parallel(ops);
  tensor_parallel_ = std::move(ops);
}

std::vector<AttentionKernel*> LlamaForCausalLM::attention_kernels() {
  std::vector<AttentionKernel*> kernels;
  for (const auto& layer : model->blocks) kernels.push_back(&layer->attention_kernel());
  return kernels;
}

std::vector<std::pair<std::string, AttentionLayer*>> LlamaForCausalLM::attention_layers() {
  std::vector<std::pair<std::string, AttentionLayer*>> layers;
  for (size_t i = 0; i < model->blocks.size(); ++i)
    layers.emplace_back("model.layers." + std::to_string(i) + ".self_attn", model->blocks[i]->self_attn.get());
  return layers;
}

void LlamaForCausalLM::set_fused_kernels(bool fused) {
  for (const auto& layer : model->blocks) layer->set_fused_kernels(fused);
  model->norm->set_fused_kernels(fused);
}

std::vector<std::pair<std::string, MoeBlockImpl*>> LlamaForCausalLM::moe_blocks() const {
  std::vector<std::pair<std::string, MoeBlockImpl*>> blocks;
  for (size_t i = 0; i < model->blocks.size(); ++i)
    if (const auto& moe = model->blocks[i]->moe)
      blocks.emplace_back("model.layers." + std::to_string(i) + ".mlp", moe.ptr().get());
  return blocks;
}

void LlamaForCausalLM::float8_layers(const std::string& name, Float8Layers& layers) {
  for (size_t i = 0; i < model->blocks.size(); ++i)
    model->blocks[i]->float8_layers(module_name(name, "model.layers." + std::to_string(i)), layers);
}

InitPlan LlamaForCausalLM::init_plan() const {
  const double std = config().init_std;
  const double output_std = std / std::sqrt(2.0 * config().num_layers);
  InitPlan plan;
  model->embed_tokens->describe_init("model.embed_tokens", std, plan);
  for (size_t i = 0; i < model->blocks.size(); ++i)
    model->blocks[i]->describe_init("model.layers." + std::to_string(i), std, output_std, plan);
  model->norm->describe_init("model.norm", plan);
  if (lm_head) lm_head->describe_init("lm_head", std, plan);
  return plan;
}

namespace {
ShardPlan::Unit unit_of(const std::string& name, const torch::nn::Module& module) {
  ShardPlan::Unit unit{name, {}, parallel::Dim::fsdp, parallel::Dim::dp, {}};
  for (const auto& item : module.named_parameters()) unit.parameters.emplace_back(name + "." + item.key(), item.value());
  return unit;
}
}  // namespace

ShardPlan LlamaForCausalLM::shard_plan() {
  ShardPlan plan;
  const bool tied = config().tie_embeddings;
  if (!tied) plan.embedding = unit_of("model.embed_tokens", *model->embed_tokens);
  for (size_t i = 0; i < model->blocks.size(); ++i)
    plan.blocks.push_back({unit_of("model.layers." + std::to_string(i), *model->blocks[i])});
  plan.head = unit_of("model.norm", *model->norm);
  plan.head.name = tied ? "root" : "head";
  if (tied)
    plan.head.parameters.insert(plan.head.parameters.begin(), {"model.embed_tokens.weight", model->embed_tokens->weight});
  else
    plan.head.parameters.emplace_back("lm_head.weight", lm_head->weight);
  return plan;
}

}  // namespace xtrain::model

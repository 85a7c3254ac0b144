#include "model/llama.h"

#include <cmath>

#include <fmt/format.h>
#include <torch/torch.h>

#include "model/layers/aux_loss.h"
#include "model/spec/llama_family.h"

namespace xtrain::model {

namespace {
MoeOptions moe_options(const ModelConfig& config, const AttentionFeatures& features) {
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
  options.gpt_oss_experts = features.gpt_oss_experts;
  options.swiglu_limit = config.swiglu_limit;
  options.swiglu_alpha = config.swiglu_alpha;
  return options;
}
}  // namespace

DecoderLayerImpl::DecoderLayerImpl(const ModelConfig& config, const AttentionFeatures& features, int64_t layer) {
  input_layernorm = register_module("input_layernorm", RMSNorm(config.hidden_size, config.norm_eps));
  if (config.latent.enabled())
    latent_attn = register_module("self_attn", LatentAttention(config));
  else
    self_attn = register_module("self_attn", Attention(config, features, layer));
  post_attention_layernorm =
      register_module("post_attention_layernorm", RMSNorm(config.hidden_size, config.norm_eps));
  if (config.is_moe_layer(layer)) {
    moe = register_module("mlp", MoeBlock(moe_options(config, features)));
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
  const auto normed_input = input_layernorm(x);
  const auto attended =
      self_attn ? self_attn(normed_input, rotary, layout) : latent_attn(normed_input, rotary, layout);
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

SharedHeadImpl::SharedHeadImpl(int64_t hidden_size, double eps) {
  norm = register_module("norm", RMSNorm(hidden_size, eps));
}

MtpLayerImpl::MtpLayerImpl(const ModelConfig& config, const AttentionFeatures& features, int64_t layer)
    : DecoderLayerImpl(config, features, layer) {
  enorm = register_module("enorm", RMSNorm(config.hidden_size, config.norm_eps));
  hnorm = register_module("hnorm", RMSNorm(config.hidden_size, config.norm_eps));
  eh_proj = register_module("eh_proj", Linear(2 * config.hidden_size, config.hidden_size, false));
  shared_head = register_module("shared_head", SharedHead(config.hidden_size, config.norm_eps));
}

torch::Tensor MtpLayerImpl::forward_ahead(const torch::Tensor& pair, const RotaryTables& rotary,
                                          const SequenceLayout& layout, double loss_weight,
                                          const torch::Tensor& balance_coefficients) {
  const auto halves = pair.chunk(2, -1);
  const auto combined = eh_proj(torch::cat({enorm(halves[0]), hnorm(halves[1])}, -1));
  const auto states = forward(combined, rotary, layout, loss_weight, balance_coefficients);
  return torch::cat({states, shared_head->norm(states)}, -1);
}

void MtpLayerImpl::describe_init(const std::string& name, double std, double output_std, InitPlan& plan) const {
  DecoderLayerImpl::describe_init(name, std, output_std, plan);
  enorm->describe_init(name + ".enorm", plan);
  hnorm->describe_init(name + ".hnorm", plan);
  eh_proj->describe_init(name + ".eh_proj", std, plan);
  shared_head->norm->describe_init(name + ".shared_head.norm", plan);
}

LlamaBodyImpl::LlamaBodyImpl(const ModelConfig& config, const AttentionFeatures& features)
    : config_(config), rotary_(rotary_tables(config.max_seq_len, config.rotary_dim(), config.rope_theta, config.rope_scaling)) {
  embed_tokens = register_module("embed_tokens", Embedding(config.vocab_size, config.hidden_size));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.num_layers; ++i) layers->push_back(DecoderLayer(config, features, i));
  // Multi-token prediction depths follow the decoder's layers, as in DeepSeek's checkpoints.
  for (int64_t i = 0; i < config.mtp_layers; ++i)
    layers->push_back(MtpLayer(config, features, config.num_layers + i));
  norm = register_module("norm", RMSNorm(config.hidden_size, config.norm_eps));
  // Buffers, so that the tables follow the module to its device (to() updates them in place).
  register_buffer("rotary_cos", rotary_.cos);
  register_buffer("rotary_sin", rotary_.sin);
}

torch::Tensor LlamaBodyImpl::forward(const torch::Tensor& input_ids, const SequenceLayout& layout,
                                     const BlockRunner& block_runner, const EmbedRunner& embed_runner,
                                     double loss_weight, const torch::Tensor& balance_coefficients) {
  check_length(input_ids, layout);
  const auto x = embed(input_ids, embed_runner);
  return norm(run_layers(x, layout, block_runner, 0, config_.num_layers, loss_weight, balance_coefficients));
}

void LlamaBodyImpl::check_length(const torch::Tensor& input_ids, const SequenceLayout& layout) const {
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
    auto* layer = (*layers)[static_cast<size_t>(i)]->as<DecoderLayer>();
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
  model = register_module("model", LlamaBody(config, features));
  if (!config.tie_embeddings)
    lm_head = register_module("lm_head", Linear(config.hidden_size, config.vocab_size, false));
}

torch::Tensor LlamaForCausalLM::output_weight() const {
  return lm_head ? lm_head->weight : model->embed_tokens->weight;
}

namespace {
// [ids; ids moved k to the left for k = 1..depths] along the rows: row block k holds at
// position i the token i + k (0 past the end, where no target is counted).
torch::Tensor tokens_ahead(const torch::Tensor& input_ids, int64_t depths) {
  std::vector<torch::Tensor> blocks = {input_ids};
  const int64_t length = input_ids.size(1);
  for (int64_t k = 1; k <= depths; ++k) {
    auto ahead = torch::zeros_like(input_ids);
    if (k < length) ahead.narrow(1, 0, length - k).copy_(input_ids.narrow(1, k, length - k));
    blocks.push_back(ahead);
  }
  return torch::cat(blocks, 0);
}
}  // namespace

std::vector<torch::Tensor> LlamaForCausalLM::predict_ahead(const Batch& batch, torch::Tensor previous,
                                                           const torch::Tensor& embedded,
                                                           const torch::Tensor& balance_coefficients) {
  std::vector<torch::Tensor> states;
  const int64_t hidden = previous.size(-1);
  for (int64_t k = 0; k < config().mtp_layers; ++k) {
    const int64_t index = config().num_layers + k;
    auto* layer = (*model->layers)[static_cast<size_t>(index)]->as<MtpLayer>();
    const auto coefficients = balance_coefficients.defined() ? balance_coefficients[index] : torch::Tensor();
    // Captures by value: a block runner may keep this callable until backward.
    auto block = [this, layer, layout = batch.layout, loss_weight = batch.loss_weight,
                  coefficients](const torch::Tensor& pair) {
      return layer->forward_ahead(pair, model->rotary(), layout, loss_weight, coefficients);
    };
    const auto pair = torch::cat({embedded[k], previous}, -1);
    const auto out = block_runner ? block_runner(index, pair, block) : block(pair);
    previous = out.narrow(-1, 0, hidden);
    states.push_back(out.narrow(-1, hidden, hidden));
  }
  return states;
}

// The balancing loss is deferred when its gradient in one layer depends on more than that
// layer's forward (every layer's counts, or every rank's): the layers attach it with rows of
// coefficients that forward() fills in at its end (model/layers/aux_loss.h).
ModelOutput LlamaForCausalLM::forward(const Batch& batch) {
  const auto& c = config();
  const bool deferred = c.num_experts > 0 && c.router_aux_loss_coef > 0 &&
                        (c.router_aux_loss_scope == AuxLossScope::model || c.router_aux_loss_global_average ||
                         sum_over_context_ranks);
  const auto all_layers = static_cast<int64_t>(model->layers->size());
  const auto coefficients =
      deferred ? torch::zeros({all_layers, c.num_experts}, torch::TensorOptions().device(batch.input_ids.device()))
               : torch::Tensor();
  std::vector<DecoderLayerImpl::RoutingReport> reports(model->layers->size());
  for (size_t i = 0; i < reports.size(); ++i) (*model->layers)[i]->as<DecoderLayer>()->report = &reports[i];
  ModelOutput output;
  if (c.mtp_layers == 0) {
    output.hidden = model(batch.input_ids, batch.layout, block_runner, embed_runner, batch.loss_weight, coefficients);
  } else {
    // One lookup of the tokens and of the tokens each depth looks ahead to, so that a sharded
    // embedding is gathered once.
    model->check_length(batch.input_ids, batch.layout);
    const int64_t depths = c.mtp_layers, rows = batch.input_ids.size(0);
    auto looked_up = model->embed(tokens_ahead(batch.input_ids, depths), embed_runner);
    looked_up = looked_up.view({depths + 1, rows, looked_up.size(1), looked_up.size(2)});
    output.hidden = model->norm(model->run_layers(looked_up[0], batch.layout, block_runner, 0, c.num_layers,
                                                  batch.loss_weight, coefficients));
    output.mtp_hidden = predict_ahead(batch, output.hidden, looked_up.narrow(0, 1, depths), coefficients);
  }
  // The vocabulary-parallel head takes the whole sequence on every rank.
  if (tensor_parallel_) output.hidden = tensor_parallel_->enter(output.hidden);
  for (const auto& layer : *model->layers) layer->as<DecoderLayer>()->report = nullptr;
  if (c.num_experts == 0) return output;
  torch::Tensor balance, z;  // sums over the layers
  std::vector<int64_t> moe_layers;
  std::vector<torch::Tensor> loads, prob_sums;
  std::vector<double> dropped;
  for (size_t i = 0; i < reports.size(); ++i) {
    const auto& report = reports[i];
    if (!report.load.defined()) continue;  // a dense layer
    moe_layers.push_back(static_cast<int64_t>(i));
    loads.push_back(report.load);
    prob_sums.push_back(report.prob_sums);
    dropped.push_back(report.dropped);
    if (report.balance.defined()) balance = balance.defined() ? balance + report.balance : report.balance;
    if (report.z.defined()) z = z.defined() ? z + report.z : report.z;
  }
  if (loads.empty()) return output;  // first_k_dense covers every layer
  output.expert_load = torch::stack(loads);
  output.dropped = torch::tensor(dropped, output.expert_load.options());
  if (deferred) balance = fill_balance_coefficients(coefficients, moe_layers, output.expert_load,
                                                    torch::stack(prob_sums), reports[moe_layers[0]].tokens);
  if (c.router_aux_loss_coef > 0 && balance.defined()) output.aux_losses.emplace_back("load_balancing", balance);
  if (c.router_z_loss_coef > 0 && z.defined()) output.aux_losses.emplace_back("router_z", z);
  return output;
}

// The coefficients of each MoE layer's summed router probabilities P_l,e in the balancing loss,
// and the loss they give on this rank. With counts C and T tokens, of this micro batch (on all of its cp ranks) or
// (global average) of every rank's, T_r this rank's: per layer, coef / L * E C_l,e / (k T T_r);
// transformers' scope, every layer alike, coef * E (sum_l C_l,e) / (k L^2 T T_r). Summed over
// the ranks with their loss weights (T_r / T), these are the global batch's losses.
torch::Tensor LlamaForCausalLM::fill_balance_coefficients(const torch::Tensor& coefficients,
                                                          const std::vector<int64_t>& moe_layers,
                                                          const torch::Tensor& counts, const torch::Tensor& prob_sums,
                                                          double tokens) const {
  const auto& c = config();
  torch::NoGradGuard no_grad;
  auto totals = torch::cat({counts.reshape(-1), torch::full({1}, tokens, counts.options())}).to(torch::kFloat64);
  if (c.router_aux_loss_global_average && sum_over_data_ranks)
    sum_over_data_ranks(totals);
  else if (sum_over_context_ranks)
    sum_over_context_ranks(totals);
  const auto layers = static_cast<int64_t>(moe_layers.size());
  auto global_counts = totals.narrow(0, 0, counts.numel()).view(counts.sizes());
  const double global_tokens = totals[-1].item<double>();
  const double base = static_cast<double>(c.num_experts) /
                      (static_cast<double>(c.num_experts_per_tok) * global_tokens * tokens) * c.router_aux_loss_coef;
  const auto rows = c.router_aux_loss_scope == AuxLossScope::model
                        ? global_counts.sum(0, /*keepdim=*/true).expand_as(global_counts) * (base / double(layers * layers))
                        : global_counts * (base / static_cast<double>(layers));
  const auto mine = rows.to(coefficients.scalar_type());
  for (int64_t i = 0; i < layers; ++i) coefficients[moe_layers[static_cast<size_t>(i)]].copy_(mine[i]);
  return (mine * prob_sums).sum();
}

// A chunk's layers report their routing as the whole model's forward has them report it, and
// chunk_routing() places the reports among every MoE layer's rows.
ModelOutput LlamaForCausalLM::forward_chunk(const Batch& batch, const torch::Tensor& hidden, int64_t first_layer,
                                            int64_t last_layer, bool embed, bool head) {
  const auto& c = config();
  TORCH_CHECK(!(c.num_experts > 0 && c.router_aux_loss_coef > 0 &&
                (c.router_aux_loss_scope == AuxLossScope::model || c.router_aux_loss_global_average)),
              "a pipeline chunk cannot defer the balancing loss over every layer or the global batch: the recipe "
              "check refuses model.router_aux_loss_scope model and router_aux_loss_global_average with parallel.pp");
  std::vector<DecoderLayerImpl::RoutingReport> reports(static_cast<size_t>(last_layer - first_layer));
  for (size_t i = 0; i < reports.size(); ++i)
    (*model->layers)[static_cast<size_t>(first_layer) + i]->as<DecoderLayer>()->report = &reports[i];
  auto x = embed ? model->embed(batch.input_ids, embed_runner) : hidden;
  x = model->run_layers(x, batch.layout, block_runner, first_layer, last_layer, batch.loss_weight, {});
  for (size_t i = 0; i < reports.size(); ++i)
    (*model->layers)[static_cast<size_t>(first_layer) + i]->as<DecoderLayer>()->report = nullptr;
  ModelOutput output;
  if (c.num_experts > 0) chunk_routing(reports, first_layer, batch.input_ids.device(), output);
  if (head) {
    x = model->norm(x);
    if (tensor_parallel_) x = tensor_parallel_->enter(x);
  }
  output.hidden = x;
  return output;
}

// Every stage reports the same names and shapes, zeros for what it does not hold, so that the
// figures sum over the pipeline group at the step's end.
void LlamaForCausalLM::chunk_routing(const std::vector<DecoderLayerImpl::RoutingReport>& reports, int64_t first_layer,
                                     const torch::Device& device, ModelOutput& output) const {
  const auto& c = config();
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  std::vector<int64_t> moe_layers;
  for (int64_t layer = 0; layer < c.num_layers; ++layer)
    if (c.is_moe_layer(layer)) moe_layers.push_back(layer);
  if (moe_layers.empty()) return;
  output.expert_load = torch::zeros({static_cast<int64_t>(moe_layers.size()), c.num_experts}, options);
  output.dropped = torch::zeros({static_cast<int64_t>(moe_layers.size())}, options);
  auto balance = torch::zeros({}, options), z = torch::zeros({}, options);
  torch::NoGradGuard no_grad;
  for (size_t row = 0; row < moe_layers.size(); ++row) {
    const int64_t index = moe_layers[row] - first_layer;
    if (index < 0 || index >= static_cast<int64_t>(reports.size())) continue;
    const auto& report = reports[static_cast<size_t>(index)];
    output.expert_load[static_cast<int64_t>(row)].copy_(report.load);
    output.dropped[static_cast<int64_t>(row)].fill_(report.dropped);
    if (report.balance.defined()) balance = balance + report.balance;
    if (report.z.defined()) z = z + report.z;
  }
  if (c.router_aux_loss_coef > 0) output.aux_losses.emplace_back("load_balancing", balance);
  if (c.router_z_loss_coef > 0) output.aux_losses.emplace_back("router_z", z);
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
  for (size_t i = 0; i < model->layers->size(); ++i) {
    const auto prefix = "model.layers." + std::to_string(i) + ".";
    const auto& layer = *(*model->layers)[i]->as<DecoderLayer>();
    const auto attention = layer.self_attn ? layer.self_attn->tensor_parallel_plan(rank, ranks)
                                           : layer.latent_attn->tensor_parallel_plan(rank, ranks);
    for (const auto& [name, slice] : attention) plan[prefix + "self_attn." + name] = slice;
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
  auto& embed = *model->embed_tokens;
  embed.tensor_parallel = ops;
  embed.first_row = split_share(config().vocab_size, ops->rank(), ops->size()).first;
  // With sequence parallelism the norms see this rank's part of the sequence.
  const auto partial = ops->sequence_parallel() ? ops : nullptr;
  for (const auto& item : *model->layers) {
    auto& layer = *item->as<DecoderLayer>();
    if (layer.self_attn)
      layer.self_attn->use_tensor_parallel(ops);
    else
      layer.latent_attn->use_tensor_parallel(ops);
    if (layer.moe)
      layer.moe->use_tensor_parallel(ops);
    else
      layer.mlp->tensor_parallel = ops;
    layer.input_layernorm->partial_gradient = partial;
    layer.post_attention_layernorm->partial_gradient = partial;
  }
  model->norm->partial_gradient = partial;
  tensor_parallel_ = std::move(ops);
}

std::vector<AttentionKernel*> LlamaForCausalLM::attention_kernels() {
  std::vector<AttentionKernel*> kernels;
  for (const auto& layer : *model->layers) kernels.push_back(&layer->as<DecoderLayer>()->attention_kernel());
  return kernels;
}

void DecoderLayerImpl::describe_init(const std::string& name, double std, double output_std, InitPlan& plan) const {
  input_layernorm->describe_init(name + ".input_layernorm", plan);
  if (self_attn)
    self_attn->describe_init(name + ".self_attn", std, output_std, plan);
  else
    latent_attn->describe_init(name + ".self_attn", std, output_std, plan);
  post_attention_layernorm->describe_init(name + ".post_attention_layernorm", plan);
  if (moe)
    moe->describe_init(name + ".mlp", std, output_std, plan);
  else
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
  ShardPlan::Unit unit{name, {}, parallel::Dim::fsdp, parallel::Dim::dp, {}};
  for (const auto& item : module.named_parameters()) unit.parameters.emplace_back(name + "." + item.key(), item.value());
  return unit;
}
}  // namespace

ShardPlan LlamaForCausalLM::shard_plan() {
  ShardPlan plan;
  const bool tied = config().tie_embeddings;
  if (!tied) plan.embedding = unit_of("model.embed_tokens", *model->embed_tokens);
  for (size_t i = 0; i < model->layers->size(); ++i)
    plan.blocks.push_back({unit_of("model.layers." + std::to_string(i), *(*model->layers)[i])});
  plan.head = unit_of("model.norm", *model->norm);
  plan.head.name = tied ? "root" : "head";
  if (tied)
    plan.head.parameters.insert(plan.head.parameters.begin(), {"model.embed_tokens.weight", model->embed_tokens->weight});
  else
    plan.head.parameters.emplace_back("lm_head.weight", lm_head->weight);
  return plan;
}

}  // namespace xtrain::model

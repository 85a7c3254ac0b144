#include "model/bert/bert.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <torch/torch.h>

#include "model/spec/bert_family.h"
#include "model/layers/module_scope.h"

namespace xtrain::model {

BertLayerImpl::BertLayerImpl(const ModelConfig& c, int64_t index)
    : num_heads_(c.num_heads), head_dim_(c.hidden_size / c.num_heads), index_(index), dropout_(c.dropout) {
  auto attention = module_scope(*this, "attention");
  auto self = module_scope(*attention, "self");
  query = self->register_module("query", Linear(c.hidden_size, c.hidden_size, true));
  key = self->register_module("key", Linear(c.hidden_size, c.hidden_size, true));
  value = self->register_module("value", Linear(c.hidden_size, c.hidden_size, true));
  auto attention_output = module_scope(*attention, "output");
  attention_dense = attention_output->register_module("dense", Linear(c.hidden_size, c.hidden_size, true));
  attention_norm = attention_output->register_module("LayerNorm", LayerNorm(c.hidden_size, c.norm_eps));
  intermediate = module_scope(*this, "intermediate")->register_module("dense", Linear(c.hidden_size, c.intermediate_size, true));
  auto output = module_scope(*this, "output");
  output_dense = output->register_module("dense", Linear(c.intermediate_size, c.hidden_size, true));
  output_norm = output->register_module("LayerNorm", LayerNorm(c.hidden_size, c.norm_eps));
}

// SDPA without dropout; with it, the eager path (transformers' "eager" BertSelfAttention), whose
// probabilities the keyed masks drop.
torch::Tensor BertLayerImpl::attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const torch::Tensor& mask, const DropoutKey& dropout) const {
  if (dropout_ == 0 || !dropout.defined()) return at::scaled_dot_product_attention(q, k, v, mask);
  auto scores = at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(head_dim_)));
  scores = scores.masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity());
  auto probs = at::softmax(scores, -1, at::kFloat).to(v.scalar_type());
  return at::matmul(attention_dropout(probs, dropout_, dropout, index_, first_head()), v);
}

// Under tensor parallelism the input enters the column-parallel projections (its gradient summed
// over the ranks); a row-parallel projection's partial products are summed, then its bias added
// once, so that the residual, the norms and the hidden dropout see whole states on every rank.
torch::Tensor BertLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& mask, const DropoutKey& dropout) {
  const int64_t b = x.size(0), t = x.size(1);
  auto enter = [this](const torch::Tensor& y) { return tensor_parallel ? tensor_parallel->enter(y) : y; };
  auto rows = [this](Linear& projection, const torch::Tensor& y) {
    if (!tensor_parallel) return projection(y);
    return tensor_parallel->leave(projection->project_with(y, projection->weight, torch::Tensor())) + projection->bias;
  };
  const auto input = enter(x);
  auto heads = [&](Linear& projection) { return projection(input).view({b, t, -1, head_dim_}).transpose(1, 2); };
  auto context = attention(heads(query), heads(key), heads(value), mask, dropout);
  context = context.transpose(1, 2).reshape({b, t, -1});
  auto drop = [&](const torch::Tensor& y, DropoutSite site) {
    return hidden_dropout(y, dropout_, dropout, index_, site);
  };
  const auto h = attention_norm(drop(rows(attention_dense, context), DropoutSite::attention_output) + x);
  return output_norm(drop(rows(output_dense, torch::gelu(intermediate(enter(h)))), DropoutSite::mlp_output) + h);
}

// Megatron's split: query, key and value by heads and the intermediate layer by width (columns,
// their biases with them), the attention's and the output's dense layers by rows (their biases
// whole); the norms stay whole.
void BertLayerImpl::tensor_parallel_plan(const std::string& name, int64_t rank, int64_t ranks,
                                         TensorParallelPlan& plan) const {
  const auto heads = split_share(num_heads_, rank, ranks);
  const TensorSlice columns{0, {heads.first * head_dim_, heads.count * head_dim_}};
  for (const char* projection : {".attention.self.query.", ".attention.self.key.", ".attention.self.value."}) {
    plan[name + projection + "weight"] = columns;
    plan[name + projection + "bias"] = columns;
  }
  plan[name + ".attention.output.dense.weight"] = {1, columns.share};
  const TensorSlice width{0, split_share(intermediate->weight.size(0), rank, ranks)};
  plan[name + ".intermediate.dense.weight"] = plan[name + ".intermediate.dense.bias"] = width;
  plan[name + ".output.dense.weight"] = {1, width.share};
}

int64_t BertLayerImpl::first_head() const {
  return tensor_parallel ? split_share(num_heads_, tensor_parallel->rank(), tensor_parallel->size()).first : 0;
}

void BertLayerImpl::describe_init(const std::string& name, double std, InitPlan& plan) const {
  query->describe_init(name + ".attention.self.query", std, plan);
  key->describe_init(name + ".attention.self.key", std, plan);
  value->describe_init(name + ".attention.self.value", std, plan);
  attention_dense->describe_init(name + ".attention.output.dense", std, plan);
  attention_norm->describe_init(name + ".attention.output.LayerNorm", plan);
  intermediate->describe_init(name + ".intermediate.dense", std, plan);
  output_dense->describe_init(name + ".output.dense", std, plan);
  output_norm->describe_init(name + ".output.LayerNorm", plan);
}

void BertLayerImpl::float8_layers(const std::string& name, Float8Layers& layers) {
  layers.linears.emplace_back(module_name(name, "attention.self.query"), query.get());
  layers.linears.emplace_back(module_name(name, "attention.self.key"), key.get());
  layers.linears.emplace_back(module_name(name, "attention.self.value"), value.get());
  layers.linears.emplace_back(module_name(name, "attention.output.dense"), attention_dense.get());
  layers.linears.emplace_back(module_name(name, "intermediate.dense"), intermediate.get());
  layers.linears.emplace_back(module_name(name, "output.dense"), output_dense.get());
}

BertForMaskedLM::BertForMaskedLM(const ModelConfig& c) : CausalLM(c) {
  auto bert = module_scope(*this, "bert");
  auto embeddings = module_scope(*bert, "embeddings");
  word_embeddings = embeddings->register_module("word_embeddings", Embedding(c.vocab_size, c.hidden_size));
  word_embeddings->padding_idx = c.pad_token_id;
  position_embeddings = embeddings->register_module("position_embeddings", Embedding(c.max_seq_len, c.hidden_size));
  token_type_embeddings =
      embeddings->register_module("token_type_embeddings", Embedding(c.type_vocab_size, c.hidden_size));
  embeddings_norm = embeddings->register_module("LayerNorm", LayerNorm(c.hidden_size, c.norm_eps));
  layers = module_scope(*bert, "encoder")->register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_layers; ++i) {
    blocks.push_back(BertLayer(c, i));
    layers->push_back(blocks.back());
  }
  auto predictions = module_scope(*module_scope(*this, "cls"), "predictions");
  prediction_bias = predictions->register_parameter("bias", unmaterialized({c.vocab_size}));
  auto transform_scope = module_scope(*predictions, "transform");
  transform = transform_scope->register_module("dense", Linear(c.hidden_size, c.hidden_size, true));
  transform_norm = transform_scope->register_module("LayerNorm", LayerNorm(c.hidden_size, c.norm_eps));
}

torch::Tensor encoder_attention_mask(const Batch& batch) {
  const int64_t b = batch.input_ids.size(0), t = batch.input_ids.size(1);
  const auto options = torch::TensorOptions().dtype(torch::kBool).device(batch.input_ids.device());
  auto mask = torch::ones({b, 1, t, t}, options);
  if (const auto keys = batch.extra_input("attention_mask"); keys.defined())
    mask = mask.logical_and(keys.ne(0).view({b, 1, 1, t}));
  if (batch.layout.packed()) {
    // Document index of each token: the count of boundaries at or before it.
    const auto bounds = batch.layout.cu_seqlens.narrow(0, 1, batch.layout.cu_seqlens.size(0) - 2).to(options.device());
    const auto positions = torch::arange(t, options.dtype(torch::kInt64));
    const auto document = positions.unsqueeze(1).ge(bounds.unsqueeze(0)).sum(1);
    mask = mask.logical_and(document.unsqueeze(1).eq(document.unsqueeze(0)).view({1, 1, t, t}));
  }
  return mask;
}

torch::Tensor BertForMaskedLM::look_up(const Batch& batch) {
  const auto& ids = batch.input_ids;
  TORCH_CHECK((batch.layout.packed() ? batch.layout.longest : ids.size(1)) <= config().max_seq_len, "sequence of ",
              ids.size(1), " tokens exceeds model.max_seq_len ", config().max_seq_len);
  auto positions = batch.layout.packed() ? batch.layout.positions
                                         : torch::arange(ids.size(1), ids.options().dtype(torch::kInt64));
  auto types = batch.extra_input("token_type_ids");
  if (!types.defined()) types = torch::zeros_like(ids);
  auto lookup = [&](const torch::Tensor& input) {
    return word_embeddings(input) + position_embeddings(positions).unsqueeze(0) + token_type_embeddings(types);
  };
  return hidden_dropout(embeddings_norm(embed_runner ? embed_runner(ids, lookup) : lookup(ids)), config().dropout,
                        batch.dropout, /*layer=*/0, DropoutSite::embeddings);
}

ModelOutput BertForMaskedLM::forward(const Batch& batch) {
  return forward_chunk(batch, {}, 0, static_cast<int64_t>(blocks.size()), /*embed=*/true, /*head=*/true);
}

ModelOutput BertForMaskedLM::forward_chunk(const Batch& batch, const torch::Tensor& hidden, int64_t first_layer,
                                           int64_t last_layer, bool embed, bool head) {
  auto x = embed ? look_up(batch) : hidden;
  const auto mask = encoder_attention_mask(batch);
  for (int64_t i = first_layer; i < last_layer; ++i) {
    auto* layer = blocks[static_cast<size_t>(i)].get();
    auto block = [layer, mask, key = batch.dropout](const torch::Tensor& input) {
      return layer->forward(input, mask, key);
    };
    x = block_runner ? block_runner(i, x, block) : block(x);
  }
  ModelOutput output;
  output.hidden = head ? transform_norm(torch::gelu(transform(x))) : x;
  // The vocabulary-parallel head takes the whole states on every rank.
  if (head && tensor_parallel_) output.hidden = tensor_parallel_->enter(output.hidden);
  return output;
}

void BertForMaskedLM::float8_layers(const std::string& name, Float8Layers& layers) {
  for (size_t i = 0; i < blocks.size(); ++i)
    blocks[i]->float8_layers(module_name(name, "bert.encoder.layer." + std::to_string(i)), layers);
  layers.linears.emplace_back(module_name(name, "cls.predictions.transform.dense"), transform.get());
}

torch::Tensor BertForMaskedLM::output_weight() const { return word_embeddings->weight; }

// The word embeddings (the lookup and the output projection) and the prediction bias by
// vocabulary rows, as llama's; the position and token-type tables, the embeddings' norm and the
// head's transform stay whole.
TensorParallelPlan BertForMaskedLM::tensor_parallel_plan(int64_t rank, int64_t ranks) const {
  const auto& c = config();
  for (const auto& [size, key] : {std::pair{c.num_heads, "model.num_heads"},
                                  std::pair{c.intermediate_size, "model.intermediate_size"}})
    if (size % ranks != 0)
      throw std::invalid_argument(
          fmt::format("{} {} does not split over {} tensor-parallel ranks (parallel.tp)", key, size, ranks));
  TensorParallelPlan plan;
  const TensorSlice vocab{0, split_share(c.vocab_size, rank, ranks)};
  plan["bert.embeddings.word_embeddings.weight"] = plan["cls.predictions.bias"] = vocab;
  for (size_t i = 0; i < blocks.size(); ++i)
    blocks[i]->tensor_parallel_plan("bert.encoder.layer." + std::to_string(i), rank, ranks, plan);
  return plan;
}

void BertForMaskedLM::use_tensor_parallel(std::shared_ptr<TensorParallelOps> ops) {
  TORCH_CHECK(!ops->sequence_parallel(), "bert splits over parallel.tp without sequence parallelism (the recipe check "
              "refuses parallel.sequence_parallel)");
  word_embeddings->split_vocabulary(ops, config().vocab_size);
  for (auto& block : blocks) block->tensor_parallel = ops;
  tensor_parallel_ = std::move(ops);
}

InitPlan BertForMaskedLM::init_plan() const {
  const double std = config().init_std;
  InitPlan plan;
  word_embeddings->describe_init("bert.embeddings.word_embeddings", std, plan);
  position_embeddings->describe_init("bert.embeddings.position_embeddings", std, plan);
  token_type_embeddings->describe_init("bert.embeddings.token_type_embeddings", std, plan);
  embeddings_norm->describe_init("bert.embeddings.LayerNorm", plan);
  for (size_t i = 0; i < layers->size(); ++i)
    blocks[i]->describe_init("bert.encoder.layer." + std::to_string(i), std, plan);
  plan["cls.predictions.bias"] = {ParameterInit::Kind::zeros, 0.0};
  transform->describe_init("cls.predictions.transform.dense", std, plan);
  transform_norm->describe_init("cls.predictions.transform.LayerNorm", plan);
  return plan;
}

ShardPlan BertForMaskedLM::shard_plan() {
  ShardPlan plan;
  for (size_t i = 0; i < layers->size(); ++i) {
    const std::string name = "bert.encoder.layer." + std::to_string(i);
    ShardPlan::Unit unit{name, {}, parallel::Dim::fsdp, parallel::Dim::dp, {}};
    for (const auto& item : (*layers)[i]->named_parameters()) unit.parameters.emplace_back(name + "." + item.key(), item.value());
    plan.blocks.push_back({std::move(unit)});
  }
  // FSDP's tied layout: no embedding unit, the root unit holding the table stays gathered.
  plan.head = {"root", {}, parallel::Dim::fsdp, parallel::Dim::dp, {}};
  for (const auto& item : named_parameters())
    if (item.key().rfind("bert.encoder.", 0) != 0) plan.head.parameters.emplace_back(item.key(), item.value());
  plan.head_read_by_every_stage = true;  // the first stage looks the tokens up, the last projects with the table
  return plan;
}

}  // namespace xtrain::model

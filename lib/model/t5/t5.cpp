#include "model/t5/t5.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>
#include <torch/torch.h>

#include "model/layers/module_scope.h"

namespace xtrain::model {
namespace {

// Dropout sites beyond the shared ones (DropoutSite): a mask differs by site.
constexpr auto kFeedForwardInner = static_cast<DropoutSite>(4);
constexpr auto kCrossOutput = static_cast<DropoutSite>(5);
constexpr auto kFinalNorm = static_cast<DropoutSite>(6);
// Cross-attention's probabilities are keyed as another layer's, so that its masks are drawn
// apart from the self-attention's whatever the tokens' identities.
constexpr int64_t kCrossLayer = int64_t{1} << 32;

void check_split(int64_t size, const char* key, int64_t ranks) {
  if (size % ranks != 0)
    throw std::invalid_argument(
        fmt::format("{} {} does not split over {} tensor-parallel ranks (parallel.tp)", key, size, ranks));
}

}  // namespace

torch::Tensor relative_position_bucket(const torch::Tensor& relative_position, bool bidirectional, int64_t num_buckets,
                                       int64_t max_distance) {
  auto buckets = torch::zeros_like(relative_position);
  auto distance = relative_position;
  if (bidirectional) {
    num_buckets /= 2;
    buckets = buckets + relative_position.gt(0).to(torch::kInt64) * num_buckets;
    distance = relative_position.abs();
  } else {
    distance = -torch::clamp_max(relative_position, 0);
  }
  const int64_t max_exact = num_buckets / 2;
  // In float32 with the divisor in double, as transformers computes it, so that the boundaries
  // between the logarithmic buckets fall on the same offsets.
  auto large = max_exact + (torch::log(distance.to(torch::kFloat32) / static_cast<double>(max_exact)) /
                            std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact)) *
                            static_cast<double>(num_buckets - max_exact))
                               .to(torch::kInt64);
  large = torch::clamp_max(large, num_buckets - 1);
  return buckets + torch::where(distance.lt(max_exact), distance, large);
}

T5AttentionImpl::T5AttentionImpl(const ModelConfig& c, bool relative_bias)
    : heads_(c.num_heads), d_kv_(c.head_dim()), d_model_(c.hidden_size) {
  const int64_t inner = heads_ * d_kv_;
  q = register_module("q", Linear(d_model_, inner, false));
  k = register_module("k", Linear(d_model_, inner, false));
  v = register_module("v", Linear(d_model_, inner, false));
  o = register_module("o", Linear(inner, d_model_, false));
  if (relative_bias)
    relative_attention_bias =
        register_module("relative_attention_bias", Embedding(c.encoder_decoder.relative_buckets, heads_));
}

// Eager attention in the input's dtype with the softmax in float32: T5's scores are not scaled,
// and the bias is added before the mask, as transformers' eager path does.
torch::Tensor T5AttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& memory, const torch::Tensor& bias,
                                       const torch::Tensor& keep,
                                       const std::function<torch::Tensor(torch::Tensor)>& dropout) {
  const int64_t b = x.size(0), t = x.size(1), s = memory.size(1);
  // Under tensor parallelism a rank's input gradients are its heads' share, which enter() sums
  // over the group: once for self-attention, whose queries, keys and values read one tensor.
  const auto input = tensor_parallel ? tensor_parallel->enter(x) : x;
  const auto source = memory.is_same(x) ? input : tensor_parallel ? tensor_parallel->enter(memory) : memory;
  const auto query = q(input).view({b, t, -1, d_kv_}).transpose(1, 2);
  const auto key = k(source).view({b, s, -1, d_kv_}).transpose(1, 2);
  const auto value = v(source).view({b, s, -1, d_kv_}).transpose(1, 2);
  auto scores = at::matmul(query, key.transpose(-2, -1));
  if (bias.defined()) scores = scores + bias;
  if (keep.defined()) scores = scores.masked_fill(keep.logical_not(), std::numeric_limits<float>::lowest());
  auto probs = at::softmax(scores, -1, at::kFloat).to(value.scalar_type());
  if (dropout) probs = dropout(probs);
  const auto out = o(at::matmul(probs, value).transpose(1, 2).reshape({b, t, -1}));
  return tensor_parallel ? tensor_parallel->leave(out) : out;
}

void T5AttentionImpl::describe_init(const std::string& name, InitPlan& plan) const {
  const auto inner = static_cast<double>(heads_ * d_kv_), d_model = static_cast<double>(d_model_);
  q->describe_init(name + ".q", 1.0 / std::sqrt(d_model * static_cast<double>(d_kv_)), plan);
  k->describe_init(name + ".k", 1.0 / std::sqrt(d_model), plan);
  v->describe_init(name + ".v", 1.0 / std::sqrt(d_model), plan);
  o->describe_init(name + ".o", 1.0 / std::sqrt(inner), plan);
  if (relative_attention_bias)
    relative_attention_bias->describe_init(name + ".relative_attention_bias", 1.0 / std::sqrt(d_model), plan);
}

void T5AttentionImpl::tensor_parallel_plan(const std::string& name, int64_t rank, int64_t ranks,
                                           TensorParallelPlan& plan) const {
  const auto heads = split_share(heads_, rank, ranks);
  const TensorSlice columns{0, {heads.first * d_kv_, heads.count * d_kv_}};
  for (const char* part : {".q.weight", ".k.weight", ".v.weight"}) plan[name + part] = columns;
  plan[name + ".o.weight"] = {1, columns.share};
  if (relative_attention_bias) plan[name + ".relative_attention_bias.weight"] = {1, heads};
}

int64_t T5AttentionImpl::first_head() const {
  return tensor_parallel ? split_share(heads_, tensor_parallel->rank(), tensor_parallel->size()).first : 0;
}

T5FeedForwardImpl::T5FeedForwardImpl(const ModelConfig& c) : d_model_(c.hidden_size), d_ff_(c.intermediate_size) {
  if (c.encoder_decoder.gated_gelu) {
    wi_0 = register_module("wi_0", Linear(d_model_, d_ff_, false));
    wi_1 = register_module("wi_1", Linear(d_model_, d_ff_, false));
  } else {
    wi = register_module("wi", Linear(d_model_, d_ff_, false));
  }
  wo = register_module("wo", Linear(d_ff_, d_model_, false));
}

torch::Tensor T5FeedForwardImpl::forward(const torch::Tensor& x,
                                         const std::function<torch::Tensor(torch::Tensor)>& dropout) {
  const auto input = tensor_parallel ? tensor_parallel->enter(x) : x;
  auto h = wi ? torch::relu(wi(input)) : torch::gelu(wi_0(input), "tanh") * wi_1(input);
  const auto out = wo(dropout ? dropout(h) : h);
  return tensor_parallel ? tensor_parallel->leave(out) : out;
}

void T5FeedForwardImpl::describe_init(const std::string& name, InitPlan& plan) const {
  const double in_std = 1.0 / std::sqrt(static_cast<double>(d_model_));
  if (wi) wi->describe_init(name + ".wi", in_std, plan);
  if (wi_0) wi_0->describe_init(name + ".wi_0", in_std, plan);
  if (wi_1) wi_1->describe_init(name + ".wi_1", in_std, plan);
  wo->describe_init(name + ".wo", 1.0 / std::sqrt(static_cast<double>(d_ff_)), plan);
}

void T5FeedForwardImpl::tensor_parallel_plan(const std::string& name, int64_t rank, int64_t ranks,
                                             TensorParallelPlan& plan) const {
  const TensorSlice columns{0, split_share(d_ff_, rank, ranks)};
  if (wi)
    plan[name + ".wi.weight"] = columns;
  else
    plan[name + ".wi_0.weight"] = plan[name + ".wi_1.weight"] = columns;
  plan[name + ".wo.weight"] = {1, columns.share};
}

int64_t T5FeedForwardImpl::first_feature() const {
  return tensor_parallel ? split_share(d_ff_, tensor_parallel->rank(), tensor_parallel->size()).first : 0;
}

T5BlockImpl::T5BlockImpl(const ModelConfig& c, bool decoder, bool relative_bias) : dropout_(c.dropout) {
  auto layer = module_scope(*this, "layer");
  auto self = module_scope(*layer, "0");
  self_attention = self->register_module("SelfAttention", T5Attention(c, relative_bias));
  self_norm = self->register_module("layer_norm", RMSNorm(c.hidden_size, c.norm_eps));
  if (decoder) {
    auto cross = module_scope(*layer, "1");
    cross_attention = cross->register_module("EncDecAttention", T5Attention(c, false));
    cross_norm = cross->register_module("layer_norm", RMSNorm(c.hidden_size, c.norm_eps));
  }
  auto ff = module_scope(*layer, decoder ? "2" : "1");
  feed_forward = ff->register_module("DenseReluDense", T5FeedForward(c));
  ff_norm = ff->register_module("layer_norm", RMSNorm(c.hidden_size, c.norm_eps));
}

torch::Tensor T5BlockImpl::forward(const torch::Tensor& x, const torch::Tensor& bias, const torch::Tensor& keep,
                                   const torch::Tensor& memory, const torch::Tensor& memory_keep,
                                   const DropoutKey& dropout, const DropoutKey& memory_dropout, int64_t layer) {
  const double p = dropout_;
  using Dropout = std::function<torch::Tensor(torch::Tensor)>;
  const bool drops = p > 0 && dropout.defined();
  // Under tensor parallelism the probabilities are this rank's heads and the activation its
  // features: their masks are those of their global indices.
  auto drop = [&](DropoutSite site, int64_t first_feature = 0) -> Dropout {
    return [&, site, first_feature](torch::Tensor y) {
      return hidden_dropout(y, p, dropout, layer, site, first_feature);
    };
  };
  auto self_probs = [&](torch::Tensor probs) {
    return attention_dropout(probs, p, dropout, layer, self_attention->first_head());
  };
  const auto normed = self_norm(x);
  auto h = x + drop(DropoutSite::attention_output)(
                   self_attention(normed, normed, bias, keep, drops ? Dropout(self_probs) : Dropout()));
  if (cross_attention) {
    auto cross_probs = [&](torch::Tensor probs) {
      // [B, heads, T, S]: the decoder's tokens query, the encoder's are the keys.
      const auto mask = attention_keep_mask(dropout, memory_dropout, layer + kCrossLayer, probs.size(1),
                                            cross_attention->first_head(), p);
      return probs * mask.to(probs.scalar_type()) * (1.0 / (1.0 - p));
    };
    h = h + drop(kCrossOutput)(cross_attention(cross_norm(h), memory, torch::Tensor(), memory_keep,
                                               drops ? Dropout(cross_probs) : Dropout()));
  }
  const auto inner = drops ? drop(kFeedForwardInner, feed_forward->first_feature()) : Dropout();
  return h + drop(DropoutSite::mlp_output)(feed_forward(ff_norm(h), inner));
}

void T5BlockImpl::describe_init(const std::string& name, InitPlan& plan) const {
  self_attention->describe_init(name + ".layer.0.SelfAttention", plan);
  self_norm->describe_init(name + ".layer.0.layer_norm", plan);
  const std::string ff = name + (cross_attention ? ".layer.2" : ".layer.1");
  if (cross_attention) {
    cross_attention->describe_init(name + ".layer.1.EncDecAttention", plan);
    cross_norm->describe_init(name + ".layer.1.layer_norm", plan);
  }
  feed_forward->describe_init(ff + ".DenseReluDense", plan);
  ff_norm->describe_init(ff + ".layer_norm", plan);
}

void T5BlockImpl::tensor_parallel_plan(const std::string& name, int64_t rank, int64_t ranks,
                                       TensorParallelPlan& plan) const {
  self_attention->tensor_parallel_plan(name + ".layer.0.SelfAttention", rank, ranks, plan);
  if (cross_attention) cross_attention->tensor_parallel_plan(name + ".layer.1.EncDecAttention", rank, ranks, plan);
  const std::string ff = name + (cross_attention ? ".layer.2" : ".layer.1");
  feed_forward->tensor_parallel_plan(ff + ".DenseReluDense", rank, ranks, plan);
}

// The norms stay whole: without sequence parallelism every rank normalises the whole states.
void T5BlockImpl::use_tensor_parallel(const std::shared_ptr<TensorParallelOps>& ops) {
  self_attention->tensor_parallel = ops;
  if (cross_attention) cross_attention->tensor_parallel = ops;
  feed_forward->tensor_parallel = ops;
}

void T5BlockImpl::float8_layers(const std::string& name, Float8Layers& layers) {
  auto attention = [&](const std::string& scope, T5AttentionImpl& a) {
    for (auto [part, linear] : {std::pair<const char*, LinearImpl*>{"q", a.q.get()}, {"k", a.k.get()},
                                {"v", a.v.get()}, {"o", a.o.get()}})
      layers.linears.emplace_back(module_name(name, scope + "." + part), linear);
  };
  attention("layer.0.SelfAttention", *self_attention);
  if (cross_attention) attention("layer.1.EncDecAttention", *cross_attention);
  const std::string ff = std::string(cross_attention ? "layer.2" : "layer.1") + ".DenseReluDense.";
  // A style has either wi (v1.0) or wi_0 and wi_1 (v1.1): the other holders are empty.
  for (auto [part, linear] : {std::pair<const char*, Linear*>{"wi", &feed_forward->wi}, {"wi_0", &feed_forward->wi_0},
                              {"wi_1", &feed_forward->wi_1}, {"wo", &feed_forward->wo}})
    if (!linear->is_empty()) layers.linears.emplace_back(module_name(name, ff + part), linear->get());
}

T5ForConditionalGeneration::T5ForConditionalGeneration(const ModelConfig& c) : CausalLM(c) {
  shared = register_module("shared", Embedding(c.vocab_size, c.hidden_size));
  auto stack = [&](const char* scope, bool decoder, int64_t depth, torch::nn::ModuleList& list,
                   std::vector<T5Block>& blocks, RMSNorm& norm) {
    auto module = module_scope(*this, scope);
    list = module->register_module("block", torch::nn::ModuleList());
    for (int64_t i = 0; i < depth; ++i) {
      blocks.push_back(T5Block(c, decoder, i == 0));
      list->push_back(blocks.back());
    }
    norm = module->register_module("final_layer_norm", RMSNorm(c.hidden_size, c.norm_eps));
  };
  stack("encoder", false, c.num_layers, encoder_layers, encoder_blocks, encoder_norm);
  stack("decoder", true, c.encoder_decoder.decoder_depth(c.num_layers), decoder_layers, decoder_blocks, decoder_norm);
  if (!c.tie_embeddings) lm_head = register_module("lm_head", Linear(c.hidden_size, c.vocab_size, false));
}

torch::Tensor T5ForConditionalGeneration::position_bias(T5Block first, int64_t queries, int64_t keys,
                                                        bool bidirectional) {
  auto table = first->self_attention->relative_attention_bias;
  const auto options = torch::TensorOptions().dtype(torch::kInt64).device(table->weight.device());
  const auto relative = torch::arange(keys, options).unsqueeze(0) - torch::arange(queries, options).unsqueeze(1);
  const auto& ed = config().encoder_decoder;
  const auto buckets = relative_position_bucket(relative, bidirectional, ed.relative_buckets, ed.relative_max_distance);
  return table->forward(buckets).permute({2, 0, 1}).unsqueeze(0);  // [1, heads, queries, keys]
}

T5ForConditionalGeneration::StepInputs T5ForConditionalGeneration::step_inputs(const Batch& batch) const {
  TORCH_CHECK(batch.decoder_input_ids.defined(), "t5 reads the decoder's input ids (Batch::decoder_input_ids)");
  TORCH_CHECK(!batch.layout.packed(), "t5 takes one sequence a row, not packed rows");
  StepInputs in;
  const int64_t b = batch.input_ids.size(0);
  in.s = batch.input_ids.size(1);
  in.t = batch.decoder_input_ids.size(1);
  // Keys at padding are masked in the encoder's attention and in cross-attention.
  if (const auto mask = batch.extra_input("attention_mask"); mask.defined())
    in.memory_keep = mask.ne(0).view({b, 1, 1, in.s});
  const auto options = torch::TensorOptions().dtype(torch::kBool).device(batch.input_ids.device());
  in.causal = torch::ones({in.t, in.t}, options).tril().view({1, 1, in.t, in.t});
  if (const auto mask = batch.extra_input("decoder_attention_mask"); mask.defined())
    in.causal = in.causal.logical_and(mask.ne(0).view({b, 1, 1, in.t}));
  // The training step keys the rows as the data holds them, [encoder input | decoder input]:
  // each stack takes its own columns.
  in.key = in.decoder_key = batch.dropout;
  if (batch.dropout.defined()) {
    TORCH_CHECK(batch.dropout.tokens.size(1) == in.s + in.t, "t5's dropout key has ", batch.dropout.tokens.size(1),
                " tokens a row, not the encoder's ", in.s, " and the decoder's ", in.t);
    in.key.tokens = batch.dropout.tokens.narrow(1, 0, in.s);
    in.decoder_key.tokens = batch.dropout.tokens.narrow(1, in.s, in.t);
  }
  return in;
}

// A block sees one tensor (block_runner's contract: FSDP and recompute run each block on a
// detached copy of it, and differentiate through that copy only). So nothing with a gradient
// is captured: each block looks its stack's position bias up from the table (a parameter),
// and a decoder block takes the encoder's output beside its states, [B, T + S, H], and passes
// it on unchanged, so that its gradient flows back block by block to the encoder (and, between
// pipeline stages, travels with the states).
torch::Tensor T5ForConditionalGeneration::run_blocks(bool decoder, int64_t begin, int64_t end, torch::Tensor x,
                                                     const StepInputs& in) {
  auto& blocks = decoder ? decoder_blocks : encoder_blocks;
  const int64_t first_index = decoder ? static_cast<int64_t>(encoder_blocks.size()) : 0;
  const int64_t t = decoder ? in.t : in.s;
  const auto keep = decoder ? in.causal : in.memory_keep;
  const auto dropout = decoder ? in.decoder_key : in.key;
  auto first = blocks.front();
  for (int64_t i = begin; i < end; ++i) {
    auto* layer = blocks[static_cast<size_t>(i)].get();
    const int64_t index = first_index + i;
    auto block = [this, layer, first, t, decoder, keep, memory_keep = in.memory_keep, dropout, memory_dropout = in.key,
                  index](const torch::Tensor& input) mutable {
      const auto bias = position_bias(first, t, t, !decoder);
      if (!decoder) return layer->forward(input, bias, keep, {}, {}, dropout, {}, index);
      const auto states = input.narrow(1, 0, t), encoded = input.narrow(1, t, input.size(1) - t);
      auto out = layer->forward(states, bias, keep, encoded, memory_keep, dropout, memory_dropout, index);
      return torch::cat({out, encoded}, 1);
    };
    x = block_runner ? block_runner(index, x, block) : block(x);
  }
  return x;
}

ModelOutput T5ForConditionalGeneration::forward(const Batch& batch) {
  const auto blocks = static_cast<int64_t>(encoder_blocks.size() + decoder_blocks.size());
  return forward_chunk(batch, {}, 0, blocks, /*embed=*/true, /*head=*/true);
}

// Blocks [first_layer, last_layer) of the encoder's then the decoder's. Between the stacks, the
// chunk that runs the decoder's first block normalises the encoder's output and sets the
// decoder's embedded input beside it: from there the chunks hand on [B, T + S, H].
ModelOutput T5ForConditionalGeneration::forward_chunk(const Batch& batch, const torch::Tensor& hidden,
                                                      int64_t first_layer, int64_t last_layer, bool embed, bool head) {
  const auto in = step_inputs(batch);
  const double p = config().dropout;
  const auto encoder_depth = static_cast<int64_t>(encoder_blocks.size());
  auto lookup = [this](const torch::Tensor& input) { return shared(input); };
  auto embedded = [&](const torch::Tensor& ids, const DropoutKey& key, int64_t layer) {
    return hidden_dropout(embed_runner ? embed_runner(ids, lookup) : lookup(ids), p, key, layer,
                          DropoutSite::embeddings);
  };
  auto x = embed ? embedded(batch.input_ids, in.key, 0) : hidden;
  if (first_layer < encoder_depth)
    x = run_blocks(/*decoder=*/false, first_layer, std::min(last_layer, encoder_depth), x, in);
  if (first_layer <= encoder_depth && encoder_depth < last_layer) {
    const auto memory = hidden_dropout(encoder_norm(x), p, in.key, 0, kFinalNorm);
    x = torch::cat({embedded(batch.decoder_input_ids, in.decoder_key, encoder_depth), memory}, 1);
  }
  if (last_layer > encoder_depth)
    x = run_blocks(/*decoder=*/true, std::max(first_layer, encoder_depth) - encoder_depth, last_layer - encoder_depth,
                   x, in);
  ModelOutput output;
  if (!head) {
    output.hidden = x;
    return output;
  }
  x = hidden_dropout(decoder_norm(x.narrow(1, 0, in.t)), p, in.decoder_key, encoder_depth, kFinalNorm);
  // v1.0 rescales the states before the tied projection (the embedding's scale is ~1).
  if (config().tie_embeddings) x = x * std::pow(static_cast<double>(config().hidden_size), -0.5);
  // The vocabulary-parallel head takes the whole states on every rank.
  if (tensor_parallel_) x = tensor_parallel_->enter(x);
  output.hidden = x;
  return output;
}

torch::Tensor T5ForConditionalGeneration::output_weight() const {
  return lm_head ? lm_head->weight : shared->weight;
}

InitPlan T5ForConditionalGeneration::init_plan() const {
  InitPlan plan;
  shared->describe_init("shared", 1.0, plan);
  for (size_t i = 0; i < encoder_blocks.size(); ++i)
    encoder_blocks[i]->describe_init("encoder.block." + std::to_string(i), plan);
  for (size_t i = 0; i < decoder_blocks.size(); ++i)
    decoder_blocks[i]->describe_init("decoder.block." + std::to_string(i), plan);
  encoder_norm->describe_init("encoder.final_layer_norm", plan);
  decoder_norm->describe_init("decoder.final_layer_norm", plan);
  if (lm_head) lm_head->describe_init("lm_head", 1.0, plan);
  return plan;
}

ShardPlan T5ForConditionalGeneration::shard_plan() {
  ShardPlan plan;
  auto is_table = [](const std::string& name) { return name.find(".relative_attention_bias.") != std::string::npos; };
  auto add_blocks = [&](const std::string& stack, const torch::nn::ModuleList& list) {
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string name = stack + ".block." + std::to_string(i);
      ShardPlan::Unit unit{name, {}, parallel::Dim::fsdp, parallel::Dim::dp, {}};
      for (const auto& item : (*list)[i]->named_parameters())
        if (!is_table(item.key())) unit.parameters.emplace_back(name + "." + item.key(), item.value());
      plan.blocks.push_back({std::move(unit)});
    }
  };
  add_blocks("encoder", encoder_layers);
  add_blocks("decoder", decoder_layers);
  // The shared table (the embedding of both stacks, and the tied head) and the position tables
  // are read outside the blocks: they stay in the root unit, gathered.
  plan.head = {"root", {}, parallel::Dim::fsdp, parallel::Dim::dp, {}};
  for (const auto& item : named_parameters()) {
    const auto& key = item.key();
    const bool in_block = (key.rfind("encoder.block.", 0) == 0 || key.rfind("decoder.block.", 0) == 0) && !is_table(key);
    if (!in_block) plan.head.parameters.emplace_back(key, item.value());
  }
  // Pipeline stages: the encoder's chunks look tokens up and read its position table; the
  // decoder's read the table, the encoder's final norm and their own position table.
  plan.head_read_by_every_stage = true;
  return plan;
}

TensorParallelPlan T5ForConditionalGeneration::tensor_parallel_plan(int64_t rank, int64_t ranks) const {
  const auto& c = config();
  check_split(c.num_heads, "model.num_heads", ranks);
  check_split(c.intermediate_size, "model.intermediate_size", ranks);
  TensorParallelPlan plan;
  const TensorSlice vocab{0, split_share(c.vocab_size, rank, ranks)};
  plan["shared.weight"] = vocab;
  if (lm_head) plan["lm_head.weight"] = vocab;
  for (size_t i = 0; i < encoder_blocks.size(); ++i)
    encoder_blocks[i]->tensor_parallel_plan("encoder.block." + std::to_string(i), rank, ranks, plan);
  for (size_t i = 0; i < decoder_blocks.size(); ++i)
    decoder_blocks[i]->tensor_parallel_plan("decoder.block." + std::to_string(i), rank, ranks, plan);
  return plan;
}

void T5ForConditionalGeneration::use_tensor_parallel(std::shared_ptr<TensorParallelOps> ops) {
  TORCH_CHECK(!ops->sequence_parallel(), "t5 splits over parallel.tp without sequence parallelism (the recipe check "
              "refuses parallel.sequence_parallel)");
  shared->split_vocabulary(ops, config().vocab_size);
  for (auto& block : encoder_blocks) block->use_tensor_parallel(ops);
  for (auto& block : decoder_blocks) block->use_tensor_parallel(ops);
  tensor_parallel_ = std::move(ops);
}

void T5ForConditionalGeneration::float8_layers(const std::string& name, Float8Layers& layers) {
  for (size_t i = 0; i < encoder_blocks.size(); ++i)
    encoder_blocks[i]->float8_layers(module_name(name, "encoder.block." + std::to_string(i)), layers);
  for (size_t i = 0; i < decoder_blocks.size(); ++i)
    decoder_blocks[i]->float8_layers(module_name(name, "decoder.block." + std::to_string(i)), layers);
}

}  // namespace xtrain::model

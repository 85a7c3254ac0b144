#include "model/clip/clip.h"

#include <cmath>

#include <torch/torch.h>

#include "model/layers/module_scope.h"
#include "model/layers/parameter_source.h"

namespace xtrain::model {

VisionConfig clip_text_layer_config(const ModelConfig& c) {
  VisionConfig layer;
  layer.hidden_size = c.hidden_size;
  layer.num_layers = c.num_layers;
  layer.num_heads = c.num_heads;
  layer.intermediate_size = c.intermediate_size;
  layer.norm_eps = c.norm_eps;
  layer.init_std = c.init_std;
  return layer;
}

ClipTextImpl::ClipTextImpl(const ModelConfig& c) : config_(c) {
  auto embeddings = module_scope(*this, "embeddings");
  token_embedding = embeddings->register_module("token_embedding", Embedding(c.vocab_size, c.hidden_size));
  position_embedding = embeddings->register_module("position_embedding", Embedding(c.max_seq_len, c.hidden_size));
  layers = module_scope(*this, "encoder")->register_module("layers", torch::nn::ModuleList());
  const auto layer_config = clip_text_layer_config(c);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    blocks.push_back(ClipEncoderLayer(layer_config));
    layers->push_back(blocks.back());
  }
  final_layer_norm = register_module("final_layer_norm", LayerNorm(c.hidden_size, c.norm_eps));
}

torch::Tensor ClipTextImpl::pooled(const torch::Tensor& input_ids, const BlockRunner& runner, int64_t first_block) {
  const int64_t n = input_ids.size(0), t = input_ids.size(1);
  TORCH_CHECK(t <= config_.max_seq_len, "clip: captions of ", t, " tokens; the text tower has ", config_.max_seq_len,
              " positions");
  auto x = token_embedding(input_ids) + position_embedding->weight.narrow(0, 0, t).unsqueeze(0);
  for (size_t i = 0; i < blocks.size(); ++i) {
    auto* layer = blocks[i].get();
    auto block = [layer](const torch::Tensor& input) { return layer->forward(input, /*causal=*/true); };
    x = runner ? runner(first_block + static_cast<int64_t>(i), x, block) : block(x);
  }
  // transformers' pooling: the first end-of-text token of each row, or (eos id 2, configs from
  // before its fix) the row's highest id, which was CLIP's tokenizer's end-of-text.
  const int64_t eos = config_.contrastive.eos_token_id;
  const auto where = eos == 2 ? input_ids.argmax(-1) : input_ids.eq(eos).to(torch::kInt).argmax(-1);
  const auto rows = torch::arange(n, where.options());
  // LayerNorm is per token: norming the pooled tokens alone is what transformers computes.
  return final_layer_norm(x.index({rows, where}));
}

void ClipTextImpl::describe_init(const std::string& name, InitPlan& plan) const {
  token_embedding->describe_init(name + ".embeddings.token_embedding", 0.02, plan);
  position_embedding->describe_init(name + ".embeddings.position_embedding", 0.02, plan);
  const auto layer_config = clip_text_layer_config(config_);
  for (size_t i = 0; i < blocks.size(); ++i)
    blocks[i]->describe_init(name + ".encoder.layers." + std::to_string(i), layer_config, plan);
  final_layer_norm->describe_init(name + ".final_layer_norm", plan);
}

void ClipTextImpl::float8_layers(const std::string& name, Float8Layers& layers) {
  for (size_t i = 0; i < blocks.size(); ++i)
    blocks[i]->float8_layers(module_name(name, "encoder.layers." + std::to_string(i)), layers);
}

ClipModel::ClipModel(const ModelConfig& c) : CausalLM(c) {
  text_model = register_module("text_model", ClipText(c));
  vision_model = register_module("vision_model", ClipVision(c.vision));
  for (auto& block : text_model->blocks) block->key_bias_gradient = false;
  for (auto& block : vision_model->blocks) block->key_bias_gradient = false;
  visual_projection =
      register_module("visual_projection", Linear(c.vision.hidden_size, c.vision.projection_dim, false));
  text_projection = register_module("text_projection", Linear(c.hidden_size, c.vision.projection_dim, false));
  logit_scale = register_parameter("logit_scale", unmaterialized({1}));
}

torch::Tensor ClipModel::image_embeds(const torch::Tensor& pixel_values) {
  const auto states = vision_model->hidden_states(pixel_values, config().vision.num_layers, block_runner, 0).back();
  const auto pooled = vision_model->post_layernorm(states.select(1, 0));
  const auto embeds = visual_projection(pooled);
  return embeds / embeds.norm(2, -1, true);
}

torch::Tensor ClipModel::text_embeds(const torch::Tensor& input_ids) {
  const auto embeds = text_projection(text_model->pooled(input_ids, block_runner, config().vision.num_layers));
  return embeds / embeds.norm(2, -1, true);
}

ClipScores ClipModel::scores(const Batch& batch) {
  const auto pixels = batch.extra_input("pixel_values");
  TORCH_CHECK(pixels.defined() && batch.input_ids.defined() && pixels.size(0) == batch.input_ids.size(0),
              "clip takes pairs: as many images (pixel_values) as captions (input_ids)");
  ClipScores s;
  s.image_embeds = image_embeds(pixels);
  s.text_embeds = text_embeds(batch.input_ids);
  if (gather_over_data_ranks) {
    s.image_embeds = gather_over_data_ranks(s.image_embeds);
    s.text_embeds = gather_over_data_ranks(s.text_embeds);
  }
  const auto logits_per_text = torch::matmul(s.text_embeds, s.image_embeds.t()) * logit_scale.exp();
  s.logits_per_image = logits_per_text.t();
  const auto targets = torch::arange(logits_per_text.size(0), batch.input_ids.options().dtype(torch::kLong));
  namespace F = torch::nn::functional;
  s.loss = (F::cross_entropy(logits_per_text, targets) + F::cross_entropy(s.logits_per_image, targets)) / 2.0;
  return s;
}

ModelOutput ClipModel::forward(const Batch& batch) {
  auto s = scores(batch);
  ModelOutput out;
  out.hidden = s.logits_per_image;
  out.loss = s.loss;
  return out;
}

InitPlan ClipModel::init_plan() const {
  InitPlan plan;
  text_model->describe_init("text_model", plan);
  vision_model->describe_init("vision_model", plan);
  const auto& c = config();
  visual_projection->describe_init("visual_projection", std::pow(static_cast<double>(c.vision.hidden_size), -0.5),
                                   plan);
  text_projection->describe_init("text_projection", std::pow(static_cast<double>(c.hidden_size), -0.5), plan);
  plan["logit_scale"] = {ParameterInit::Kind::constant, 0.0, c.contrastive.logit_scale_init};
  return plan;
}

ShardPlan ClipModel::shard_plan() {
  auto unit = [](const std::string& name, const torch::nn::Module& module) {
    ShardPlan::Unit u{name, {}, parallel::Dim::fsdp, parallel::Dim::dp, {}};
    for (const auto& item : module.named_parameters()) u.parameters.emplace_back(name + "." + item.key(), item.value());
    return u;
  };
  ShardPlan plan;
  for (size_t i = 0; i < vision_model->layers->size(); ++i)
    plan.blocks.push_back({unit("vision_model.encoder.layers." + std::to_string(i), *(*vision_model->layers)[i])});
  for (size_t i = 0; i < text_model->layers->size(); ++i)
    plan.blocks.push_back({unit("text_model.encoder.layers." + std::to_string(i), *(*text_model->layers)[i])});
  // The embeddings, norms, projections and logit_scale: the root unit, gathered throughout.
  plan.head = {"root", {}, parallel::Dim::fsdp, parallel::Dim::dp, {}};
  for (const auto& item : named_parameters())
    if (item.key().find(".encoder.layers.") == std::string::npos)
      plan.head.parameters.emplace_back(item.key(), item.value());
  return plan;
}

std::vector<EmbeddingImpl*> ClipModel::lookup_tables() {
  return {text_model->token_embedding.get(), text_model->position_embedding.get(),
          vision_model->position_embedding.get()};
}

void ClipModel::float8_layers(const std::string& name, Float8Layers& layers) {
  vision_model->float8_layers(module_name(name, "vision_model"), layers);
  text_model->float8_layers(module_name(name, "text_model"), layers);
  layers.linears.emplace_back(module_name(name, "visual_projection"), visual_projection.get());
  layers.linears.emplace_back(module_name(name, "text_projection"), text_projection.get());
}

}  // namespace xtrain::model

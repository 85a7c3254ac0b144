#include "model/vit/vit.h"

#include <cmath>

#include <torch/torch.h>

#include "model/layers/module_scope.h"
#include "model/layers/parameter_source.h"

namespace xtrain::model {

VitLayerImpl::VitLayerImpl(const ModelConfig& c, int64_t index)
    : head_dim_(c.hidden_size / c.num_heads), index_(index), dropout_(c.dropout) {
  auto attention = module_scope(*this, "attention");
  auto self = module_scope(*attention, "attention");
  query = self->register_module("query", Linear(c.hidden_size, c.hidden_size, true));
  key = self->register_module("key", Linear(c.hidden_size, c.hidden_size, true));
  value = self->register_module("value", Linear(c.hidden_size, c.hidden_size, true));
  attention_dense = module_scope(*attention, "output")->register_module("dense", Linear(c.hidden_size, c.hidden_size, true));
  intermediate = module_scope(*this, "intermediate")->register_module("dense", Linear(c.hidden_size, c.intermediate_size, true));
  output_dense = module_scope(*this, "output")->register_module("dense", Linear(c.intermediate_size, c.hidden_size, true));
  layernorm_before = register_module("layernorm_before", LayerNorm(c.hidden_size, c.norm_eps));
  layernorm_after = register_module("layernorm_after", LayerNorm(c.hidden_size, c.norm_eps));
}

torch::Tensor VitLayerImpl::forward(const torch::Tensor& x, const DropoutKey& dropout) {
  const int64_t n = x.size(0), t = x.size(1);
  const auto normed = layernorm_before(x);
  auto heads = [&](const torch::Tensor& projected) { return projected.view({n, t, -1, head_dim_}).transpose(1, 2); };
  // The key bias adds q . b to every score of a query alike, which softmax cancels: its gradient
  // is zero, exactly so here (detached) rather than rounding noise that AdamW would scale up to
  // steps of the learning rate's size, differently on each layout.
  const auto keys = key->project_with(normed, key->weight, {}) + key->bias.detach();
  // Every token sees every token of its image: no mask. With dropout, transformers' eager
  // attention, whose probabilities the keyed masks drop.
  const bool drops = dropout_ > 0 && dropout.defined();
  const auto q = heads(query(normed)), k = heads(keys), v = heads(value(normed));
  torch::Tensor context;
  if (drops) {
    const auto scores = at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(head_dim_)));
    const auto probs = at::softmax(scores, -1, at::kFloat).to(v.scalar_type());
    context = at::matmul(attention_dropout(probs, dropout_, dropout, index_), v);
  } else {
    context = at::scaled_dot_product_attention(q, k, v);
  }
  auto drop = [&](const torch::Tensor& y, DropoutSite site) {
    return hidden_dropout(y, dropout_, dropout, index_, site);
  };
  const auto h = x + drop(attention_dense(context.transpose(1, 2).reshape({n, t, -1})), DropoutSite::attention_output);
  return h + drop(output_dense(torch::gelu(intermediate(layernorm_after(h)))), DropoutSite::mlp_output);
}

void VitLayerImpl::describe_init(const std::string& name, double std, InitPlan& plan) const {
  query->describe_init(name + ".attention.attention.query", std, plan);
  key->describe_init(name + ".attention.attention.key", std, plan);
  value->describe_init(name + ".attention.attention.value", std, plan);
  attention_dense->describe_init(name + ".attention.output.dense", std, plan);
  intermediate->describe_init(name + ".intermediate.dense", std, plan);
  output_dense->describe_init(name + ".output.dense", std, plan);
  layernorm_before->describe_init(name + ".layernorm_before", plan);
  layernorm_after->describe_init(name + ".layernorm_after", plan);
}

void VitLayerImpl::float8_layers(const std::string& name, Float8Layers& layers) {
  layers.linears.emplace_back(module_name(name, "attention.attention.query"), query.get());
  layers.linears.emplace_back(module_name(name, "attention.attention.key"), key.get());
  layers.linears.emplace_back(module_name(name, "attention.attention.value"), value.get());
  layers.linears.emplace_back(module_name(name, "attention.output.dense"), attention_dense.get());
  layers.linears.emplace_back(module_name(name, "intermediate.dense"), intermediate.get());
  layers.linears.emplace_back(module_name(name, "output.dense"), output_dense.get());
}

VitForImageClassification::VitForImageClassification(const ModelConfig& c) : CausalLM(c) {
  const auto& v = c.vision;
  auto vit = module_scope(*this, "vit");
  auto embeddings = module_scope(*vit, "embeddings");
  cls_token = embeddings->register_parameter("cls_token", unmaterialized({1, 1, c.hidden_size}));
  auto projection = module_scope(*module_scope(*embeddings, "patch_embeddings"), "projection");
  patch_weight = projection->register_parameter(
      "weight", unmaterialized({c.hidden_size, v.num_channels, v.patch_size, v.patch_size}));
  patch_bias = projection->register_parameter("bias", unmaterialized({c.hidden_size}));
  position_embeddings =
      embeddings->register_parameter("position_embeddings", unmaterialized({1, v.num_patches() + 1, c.hidden_size}));
  layers = module_scope(*vit, "encoder")->register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_layers; ++i) {
    blocks.push_back(VitLayer(c, i));
    layers->push_back(blocks.back());
  }
  layernorm = vit->register_module("layernorm", LayerNorm(c.hidden_size, c.norm_eps));
  classifier = register_module("classifier", Linear(c.hidden_size, c.vocab_size, true));
}

torch::Tensor VitForImageClassification::embed(const torch::Tensor& pixel_values) {
  const auto& v = config().vision;
  TORCH_CHECK(pixel_values.defined() && pixel_values.dim() == 4 && pixel_values.size(1) == v.num_channels &&
                  pixel_values.size(2) == v.image_size && pixel_values.size(3) == v.image_size,
              "vit takes pixel_values [images, ", v.num_channels, ", ", v.image_size, ", ", v.image_size, "]");
  const int64_t n = pixel_values.size(0);
  auto patches = at::conv2d(pixel_values.to(patch_weight.scalar_type()), patch_weight, patch_bias, v.patch_size);
  patches = patches.flatten(2).transpose(1, 2);  // [N, patches, hidden], row-major over the grid
  return torch::cat({cls_token.expand({n, 1, -1}), patches}, 1) + position_embeddings;
}

ModelOutput VitForImageClassification::forward(const Batch& batch) {
  const auto pixels = batch.extra_input("pixel_values");
  TORCH_CHECK(!batch.input_ids.defined() || batch.input_ids.size(0) == pixels.size(0), "vit: ",
              batch.input_ids.size(0), " rows of labels for ", pixels.size(0), " images");
  auto x = embed(pixels);
  const auto key = batch.dropout.rows_of(x.size(1));
  x = hidden_dropout(x, config().dropout, key, /*layer=*/0, DropoutSite::embeddings);
  for (size_t i = 0; i < blocks.size(); ++i) {
    auto* layer = blocks[i].get();
    auto block = [layer, key](const torch::Tensor& input) { return layer->forward(input, key); };
    x = block_runner ? block_runner(static_cast<int64_t>(i), x, block) : block(x);
  }
  // LayerNorm is per token: norming the class token alone is the classifier's input.
  ModelOutput output;
  output.hidden = layernorm(x.narrow(1, 0, 1));
  return output;
}

void VitForImageClassification::float8_layers(const std::string& name, Float8Layers& layers) {
  for (size_t i = 0; i < blocks.size(); ++i)
    blocks[i]->float8_layers(module_name(name, "vit.encoder.layer." + std::to_string(i)), layers);
}

InitPlan VitForImageClassification::init_plan() const {
  const double std = config().init_std;
  InitPlan plan;
  plan["vit.embeddings.cls_token"] = {ParameterInit::Kind::normal, std};
  plan["vit.embeddings.position_embeddings"] = {ParameterInit::Kind::normal, std};
  plan["vit.embeddings.patch_embeddings.projection.weight"] = {ParameterInit::Kind::normal, std};
  plan["vit.embeddings.patch_embeddings.projection.bias"] = {ParameterInit::Kind::zeros, 0.0};
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i]->describe_init("vit.encoder.layer." + std::to_string(i), std, plan);
  layernorm->describe_init("vit.layernorm", plan);
  classifier->describe_init("classifier", std, plan);
  return plan;
}

ShardPlan VitForImageClassification::shard_plan() {
  ShardPlan plan;
  for (size_t i = 0; i < layers->size(); ++i) {
    const std::string name = "vit.encoder.layer." + std::to_string(i);
    ShardPlan::Unit unit{name, {}, parallel::Dim::fsdp, parallel::Dim::dp, {}};
    for (const auto& item : (*layers)[i]->named_parameters()) unit.parameters.emplace_back(name + "." + item.key(), item.value());
    plan.blocks.push_back({std::move(unit)});
  }
  // No embedding unit: the root unit (embeddings, final norm, classifier) stays gathered.
  plan.head = {"root", {}, parallel::Dim::fsdp, parallel::Dim::dp, {}};
  for (const auto& item : named_parameters())
    if (item.key().rfind("vit.encoder.", 0) != 0) plan.head.parameters.emplace_back(item.key(), item.value());
  return plan;
}

}  // namespace xtrain::model

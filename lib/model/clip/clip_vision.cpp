#include "model/clip/clip_vision.h"

#include <cmath>

#include <torch/torch.h>

#include "model/layers/module_scope.h"
#include "model/layers/parameter_source.h"

namespace xtrain::model {
torch::Tensor quick_gelu(const torch::Tensor& x) { return x * torch::sigmoid(1.702 * x); }

// Registered in transformers' order (k, v, q, out), so that named_parameters lists alike.
ClipEncoderLayerImpl::ClipEncoderLayerImpl(const VisionConfig& c)
    : num_heads_(c.num_heads), head_dim_(c.hidden_size / c.num_heads) {
  auto attention = module_scope(*this, "self_attn");
  k_proj = attention->register_module("k_proj", Linear(c.hidden_size, c.hidden_size, true));
  v_proj = attention->register_module("v_proj", Linear(c.hidden_size, c.hidden_size, true));
  q_proj = attention->register_module("q_proj", Linear(c.hidden_size, c.hidden_size, true));
  out_proj = attention->register_module("out_proj", Linear(c.hidden_size, c.hidden_size, true));
  layer_norm1 = register_module("layer_norm1", LayerNorm(c.hidden_size, c.norm_eps));
  auto mlp = module_scope(*this, "mlp");
  fc1 = mlp->register_module("fc1", Linear(c.hidden_size, c.intermediate_size, true));
  fc2 = mlp->register_module("fc2", Linear(c.intermediate_size, c.hidden_size, true));
  layer_norm2 = register_module("layer_norm2", LayerNorm(c.hidden_size, c.norm_eps));
}

torch::Tensor ClipEncoderLayerImpl::forward(const torch::Tensor& x, bool causal) {
  const int64_t n = x.size(0), t = x.size(1);
  const auto normed = layer_norm1(x);
  auto heads = [&](const torch::Tensor& projected) { return projected.view({n, t, -1, head_dim_}).transpose(1, 2); };
  const auto keys = key_bias_gradient ? k_proj(normed)
                                      : k_proj->project_with(normed, k_proj->weight, {}) + k_proj->bias.detach();
  // An image's tokens see each other all: no mask.
  auto context =
      at::scaled_dot_product_attention(heads(q_proj(normed)), heads(keys), heads(v_proj(normed)), {}, 0.0, causal);
  const auto h = x + out_proj(context.transpose(1, 2).reshape({n, t, -1}));
  return h + fc2(quick_gelu(fc1(layer_norm2(h))));
}

void ClipEncoderLayerImpl::describe_init(const std::string& name, const VisionConfig& c, InitPlan& plan) const {
  const double hidden = static_cast<double>(c.hidden_size);
  const double in_std = std::pow(hidden, -0.5) * std::pow(2.0 * static_cast<double>(c.num_layers), -0.5);
  const double out_std = std::pow(hidden, -0.5);
  const double fc_std = std::pow(2.0 * hidden, -0.5);
  k_proj->describe_init(name + ".self_attn.k_proj", in_std, plan);
  v_proj->describe_init(name + ".self_attn.v_proj", in_std, plan);
  q_proj->describe_init(name + ".self_attn.q_proj", in_std, plan);
  out_proj->describe_init(name + ".self_attn.out_proj", out_std, plan);
  layer_norm1->describe_init(name + ".layer_norm1", plan);
  fc1->describe_init(name + ".mlp.fc1", fc_std, plan);
  fc2->describe_init(name + ".mlp.fc2", in_std, plan);
  layer_norm2->describe_init(name + ".layer_norm2", plan);
}

ClipVisionImpl::ClipVisionImpl(const VisionConfig& c) : config_(c) {
  auto embeddings = module_scope(*this, "embeddings");
  class_embedding = embeddings->register_parameter("class_embedding", unmaterialized({c.hidden_size}));
  patch_weight = module_scope(*embeddings, "patch_embedding")
                     ->register_parameter("weight", unmaterialized({c.hidden_size, c.num_channels, c.patch_size,
                                                                    c.patch_size}));
  position_embedding =
      embeddings->register_module("position_embedding", Embedding(c.num_patches() + 1, c.hidden_size));
  pre_layrnorm = register_module("pre_layrnorm", LayerNorm(c.hidden_size, c.norm_eps));
  layers = module_scope(*this, "encoder")->register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_layers; ++i) {
    blocks.push_back(ClipEncoderLayer(c));
    layers->push_back(blocks.back());
  }
  post_layernorm = register_module("post_layernorm", LayerNorm(c.hidden_size, c.norm_eps));
}

torch::Tensor ClipVisionImpl::embed(const torch::Tensor& pixel_values) {
  const auto& c = config_;
  TORCH_CHECK(pixel_values.dim() == 4 && pixel_values.size(1) == c.num_channels &&
                  pixel_values.size(2) == c.image_size && pixel_values.size(3) == c.image_size,
              "pixel_values of shape ", pixel_values.sizes(), "; the vision tower takes [images, ", c.num_channels,
              ", ", c.image_size, ", ", c.image_size, "]");
  const int64_t n = pixel_values.size(0);
  auto patches = at::conv2d(pixel_values.to(patch_weight.scalar_type()), patch_weight, {}, c.patch_size);
  patches = patches.flatten(2).transpose(1, 2);  // [N, patches, hidden], row-major over the grid
  const auto cls = class_embedding.view({1, 1, -1}).expand({n, 1, c.hidden_size});
  return pre_layrnorm(torch::cat({cls, patches}, 1) + position_embedding->weight.unsqueeze(0));
}

std::vector<torch::Tensor> ClipVisionImpl::hidden_states(const torch::Tensor& pixel_values, int64_t depth,
                                                         const BlockRunner& runner, int64_t first_block) {
  TORCH_CHECK(depth >= 0 && depth <= static_cast<int64_t>(layers->size()), "vision depth ", depth, " of ",
              layers->size(), " layers");
  std::vector<torch::Tensor> states{embed(pixel_values)};
  for (int64_t i = 0; i < depth; ++i) {
    auto* layer = blocks[static_cast<size_t>(i)].get();
    auto block = [layer](const torch::Tensor& input) { return layer->forward(input); };
    states.push_back(runner ? runner(first_block + i, states.back(), block) : block(states.back()));
  }
  return states;
}

void ClipEncoderLayerImpl::float8_layers(const std::string& name, Float8Layers& layers) {
  layers.linears.emplace_back(module_name(name, "self_attn.k_proj"), k_proj.get());
  layers.linears.emplace_back(module_name(name, "self_attn.v_proj"), v_proj.get());
  layers.linears.emplace_back(module_name(name, "self_attn.q_proj"), q_proj.get());
  layers.linears.emplace_back(module_name(name, "self_attn.out_proj"), out_proj.get());
  layers.linears.emplace_back(module_name(name, "mlp.fc1"), fc1.get());
  layers.linears.emplace_back(module_name(name, "mlp.fc2"), fc2.get());
}

void ClipVisionImpl::float8_layers(const std::string& name, Float8Layers& layers) {
  for (size_t i = 0; i < blocks.size(); ++i)
    blocks[i]->float8_layers(module_name(name, "encoder.layers." + std::to_string(i)), layers);
}

void ClipVisionImpl::describe_init(const std::string& name, InitPlan& plan) const {
  const auto& c = config_;
  plan[name + ".embeddings.class_embedding"] = {ParameterInit::Kind::normal,
                                                std::pow(static_cast<double>(c.hidden_size), -0.5)};
  plan[name + ".embeddings.patch_embedding.weight"] = {ParameterInit::Kind::normal, c.init_std};
  position_embedding->describe_init(name + ".embeddings.position_embedding", c.init_std, plan);
  pre_layrnorm->describe_init(name + ".pre_layrnorm", plan);
  for (size_t i = 0; i < layers->size(); ++i)
    blocks[i]->describe_init(name + ".encoder.layers." + std::to_string(i), c, plan);
  post_layernorm->describe_init(name + ".post_layernorm", plan);
}

}  // namespace xtrain::model

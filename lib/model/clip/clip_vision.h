// The CLIP vision transformer as transformers' CLIPVisionModel computes it: a patch Conv2d
// (no bias) over a square image, a class token in front, learned position embeddings,
// pre_layrnorm, N pre-LN encoder layers [LayerNorm -> bidirectional attention with q, k, v and
// out biases -> residual, LayerNorm -> fc1, quick_gelu (x * sigmoid(1.702 x)), fc2 -> residual],
// and post_layernorm (which only CLIP's pooled output reads: a vision-language model takes an
// encoder layer's hidden states, so the layer is held for the checkpoint's sake). Parameter names
// under the module are transformers' (embeddings.class_embedding, encoder.layers.0.self_attn.
// q_proj.weight, ...).
//
// Init as CLIP's (factor 1): embeddings ~ N(0, init_std^2) but the class token ~ N(0, 1/hidden);
// q, k, v and fc2 ~ N(0, 1/(2 hidden layers)) and out_proj ~ N(0, 1/hidden) scaled by hidden's
// root as CLIP does; fc1 ~ N(0, 1/(2 hidden)); biases 0, LayerNorm gains 1.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include "model/causal_lm.h"
#include "model/layers/float8_user.h"
#include "model/layers/layer_norm.h"
#include "model/layers/linear.h"
#include "model/spec/model_config.h"

namespace xtrain::model {

class ClipEncoderLayerImpl : public torch::nn::Module, public Float8User {
 public:
  explicit ClipEncoderLayerImpl(const VisionConfig& config);
  // x [N, tokens, hidden]; causal: each token sees those up to itself (CLIP's text tower).
  torch::Tensor forward(const torch::Tensor& x, bool causal = false);
  void describe_init(const std::string& name, const VisionConfig& config, InitPlan& plan) const;
  void float8_layers(const std::string& name, Float8Layers& layers) override;  // attention and MLP projections

  Linear k_proj{nullptr}, v_proj{nullptr}, q_proj{nullptr}, out_proj{nullptr};
  // False: k_proj's bias takes no gradient (clip). Its gradient is zero in exact arithmetic (a
  // shift of all of a query's scores, which softmax cancels), so what autograd computes is
  // rounding noise, which AdamW scales up to steps of the learning rate's size, differently on
  // each layout. llava keeps it, as transformers does.
  bool key_bias_gradient = true;
  LayerNorm layer_norm1{nullptr};
  Linear fc1{nullptr}, fc2{nullptr};
  LayerNorm layer_norm2{nullptr};

 private:
  int64_t num_heads_, head_dim_;
};
TORCH_MODULE(ClipEncoderLayer);

class ClipVisionImpl : public torch::nn::Module, public Float8User {
 public:
  explicit ClipVisionImpl(const VisionConfig& config);
  // pixel_values [N, channels, image_size, image_size] -> the hidden states [N, 1 + patches,
  // hidden] of the embeddings (after pre_layrnorm) and of each of the first `depth` encoder
  // layers: transformers' hidden_states[0 .. depth]. Layers past `depth` are not run (nothing
  // reads them). Layer i runs through runner(first_block + i, ...) when a runner is set.
  std::vector<torch::Tensor> hidden_states(const torch::Tensor& pixel_values, int64_t depth,
                                           const BlockRunner& runner = {}, int64_t first_block = 0);
  // The embeddings' and the pre_layrnorm's part of hidden_states.
  torch::Tensor embed(const torch::Tensor& pixel_values);
  void describe_init(const std::string& name, InitPlan& plan) const;
  // Every encoder layer's, those past a model's feature layer too (the patch embedding is no
  // linear layer).
  void float8_layers(const std::string& name, Float8Layers& layers) override;

  torch::Tensor class_embedding;  // [hidden]
  torch::Tensor patch_weight;     // embeddings.patch_embedding.weight [hidden, channels, patch, patch]
  Embedding position_embedding{nullptr};  // [1 + patches, hidden]
  LayerNorm pre_layrnorm{nullptr};        // transformers' spelling
  torch::nn::ModuleList layers{nullptr};  // encoder.layers: the modules of `blocks`, for their names
  std::vector<ClipEncoderLayer> blocks;
  LayerNorm post_layernorm{nullptr};

 private:
  VisionConfig config_;
};
TORCH_MODULE(ClipVision);

// CLIP's activation: x * sigmoid(1.702 x).
torch::Tensor quick_gelu(const torch::Tensor& x);

}  // namespace xtrain::model

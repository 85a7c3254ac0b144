// ViT (transformers' ViTForImageClassification): a patch Conv2d (with bias) over a square image,
// a class token in front, learned position embeddings added; N pre-LN encoder layers
// [layernorm_before -> bidirectional attention with q, k, v and output biases -> residual,
// layernorm_after -> dense, exact GELU, dense -> residual]; the final layernorm; the classifier
// on the class token. Parameter names are Hugging Face's (vit.embeddings.cls_token,
// vit.encoder.layer.0.attention.attention.query.weight, ..., classifier.bias).
//
// The engine sees it as a model whose vocabulary is the labels: the image comes in as
// Batch::extra["pixel_values"] [B, channels, image_size, image_size] (input_ids [B, 1] are
// placeholders), forward() gives the class token's normed state [B, 1, hidden], and the loss
// multiplies it by output_weight() (the classifier) plus output_bias(): cross entropy over the
// labels [B, 1], transformers' single-label loss. The key biases get no gradient: theirs is zero
// in exact arithmetic (softmax cancels them), where transformers computes rounding noise.
//
// Dropout (model.dropout, training only: Batch::dropout defined) where transformers applies it:
// on the embeddings, on the attention probabilities (then by the eager path instead of SDPA) and
// on each sublayer's output before its residual add; its masks are keyed
// (model/layers/keyed_dropout.h) by the image's sample index and the token's position.
//
// Init as transformers': weights ~ N(0, init_std^2) (the class token and positions too; transformers
// truncates at 2 std), biases 0, LayerNorm gains 1. Not split by tensor or pipeline parallelism.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include "model/causal_lm.h"
#include "model/layers/float8_user.h"
#include "model/layers/keyed_dropout.h"
#include "model/layers/layer_norm.h"
#include "model/layers/linear.h"

namespace xtrain::model {

class VitLayerImpl : public torch::nn::Module, public Float8User {
 public:
  // index: the layer's place in the encoder, which keys its dropout masks.
  VitLayerImpl(const ModelConfig& config, int64_t index);
  torch::Tensor forward(const torch::Tensor& x, const DropoutKey& dropout = {});  // [N, tokens, hidden]
  void describe_init(const std::string& name, double std, InitPlan& plan) const;
  void float8_layers(const std::string& name, Float8Layers& layers) override;  // attention and MLP projections

  Linear query{nullptr}, key{nullptr}, value{nullptr}, attention_dense{nullptr};
  LayerNorm layernorm_before{nullptr}, layernorm_after{nullptr};
  Linear intermediate{nullptr}, output_dense{nullptr};

 private:
  int64_t head_dim_, index_;
  double dropout_;
};
TORCH_MODULE(VitLayer);

class VitForImageClassification final : public CausalLM {
 public:
  explicit VitForImageClassification(const ModelConfig& config);

  ModelOutput forward(const Batch& batch) override;
  torch::Tensor output_weight() const override { return classifier->weight; }
  torch::Tensor output_bias() const override { return classifier->bias; }
  InitPlan init_plan() const override;
  // Each encoder layer its own unit; the embeddings, final layernorm and classifier the root's.
  ShardPlan shard_plan() override;
  std::vector<AttentionKernel*> attention_kernels() override { return {}; }
  std::vector<EmbeddingImpl*> lookup_tables() override { return {}; }
  // Each encoder layer's projections (the patch convolution and the classifier stay in high precision).
  void float8_layers(const std::string& name, Float8Layers& layers) override;

  torch::Tensor cls_token, position_embeddings, patch_weight, patch_bias;
  torch::nn::ModuleList layers{nullptr};  // vit.encoder.layer: the modules of `blocks`, for their names
  std::vector<VitLayer> blocks;
  LayerNorm layernorm{nullptr};
  Linear classifier{nullptr};

 private:
  torch::Tensor embed(const torch::Tensor& pixel_values);
};

}  // namespace xtrain::model

// CLIP (transformers' CLIPModel): a text tower and an image tower whose pooled states, projected
// into one space and L2-normalised, are scored against each other by cosine similarity times
// exp(logit_scale); the loss is CLIP's symmetric cross entropy over the image-text similarity
// matrix, each image's own caption the target of its row and each caption's own image of its.
//
// The text tower (text_model.*) is CLIPTextTransformer: token + learned position embeddings,
// causal pre-LN encoder layers (model/clip/clip_vision.h's, with quick_gelu), final_layer_norm;
// its pooled state is a row's at the end-of-text token (ContrastiveConfig::eos_token_id: its
// first occurrence, or with id 2 the row's highest id, as transformers reads older configs).
// The image tower (vision_model.*) is model/clip/clip_vision.h's ClipVision; its pooled state is
// the class token's after post_layernorm. visual_projection and text_projection have no bias;
// logit_scale is a scalar parameter. Parameter names are transformers'.
//
// The engine sees it as a model that computes its own loss: Batch::input_ids [B, T] are the
// captions' tokens (anything after the end-of-text token is never read: attention is causal),
// extra["pixel_values"] [B, C, S, S] the images, row i of each a pair; forward() returns the
// loss in ModelOutput::loss and the logits per image [B, B] in `hidden`. Under data parallelism
// (gather_over_data_ranks set) the embeddings of every rank are gathered first, so that every
// rank computes the global batch's loss, whose gradient the gather returns to each rank's own
// rows; the trainer weighs each rank's copy by its share of the pairs, so the sum over ranks is
// one process's loss over the global batch.
//
// Block numbering (block_runner, the shard plan): the image tower's layers, then the text
// tower's. Not split by tensor, pipeline, context or expert parallelism (FSDP shards it).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include "model/causal_lm.h"
#include "model/clip/clip_vision.h"
#include "model/layers/layer_norm.h"
#include "model/layers/linear.h"

namespace xtrain::model {

// The image tower's layer shape for the text tower's layers (they compute the same).
VisionConfig clip_text_layer_config(const ModelConfig& config);

class ClipTextImpl : public torch::nn::Module, public Float8User {
 public:
  explicit ClipTextImpl(const ModelConfig& config);
  // input_ids [B, T] -> the pooled states [B, hidden]; layer i runs through
  // runner(first_block + i, ...) when a runner is set.
  torch::Tensor pooled(const torch::Tensor& input_ids, const BlockRunner& runner, int64_t first_block);
  void describe_init(const std::string& name, InitPlan& plan) const;
  void float8_layers(const std::string& name, Float8Layers& layers) override;

  Embedding token_embedding{nullptr}, position_embedding{nullptr};
  torch::nn::ModuleList layers{nullptr};  // encoder.layers
  std::vector<ClipEncoderLayer> blocks;
  LayerNorm final_layer_norm{nullptr};

 private:
  ModelConfig config_;
};
TORCH_MODULE(ClipText);

// The similarity of a batch's images and captions, and the loss over it.
struct ClipScores {
  torch::Tensor image_embeds, text_embeds;  // normalised, [N, projection_dim]
  torch::Tensor logits_per_image;           // [N, N]: exp(logit_scale) image_embeds text_embeds^T
  torch::Tensor loss;                       // (CE(logits_per_text) + CE(logits_per_image)) / 2
};

class ClipModel final : public CausalLM {
 public:
  explicit ClipModel(const ModelConfig& config);

  ModelOutput forward(const Batch& batch) override;
  // The embeddings, logits and loss of this rank's pairs, or with gather_over_data_ranks of the
  // global batch's.
  ClipScores scores(const Batch& batch);
  // The normalised embeddings of images [N, C, S, S] and of captions [N, T].
  torch::Tensor image_embeds(const torch::Tensor& pixel_values);
  torch::Tensor text_embeds(const torch::Tensor& input_ids);
  // No vocabulary head: the text projection stands in for the interface (nothing reads it as one).
  torch::Tensor output_weight() const override { return text_projection->weight; }
  InitPlan init_plan() const override;
  ShardPlan shard_plan() override;
  std::vector<AttentionKernel*> attention_kernels() override { return {}; }
  std::vector<EmbeddingImpl*> lookup_tables() override;
  int64_t vision_blocks() const override { return config().vision.num_layers; }
  void float8_layers(const std::string& name, Float8Layers& layers) override;

  ClipText text_model{nullptr};
  ClipVision vision_model{nullptr};
  Linear visual_projection{nullptr}, text_projection{nullptr};
  // [1]: FSDP shards and the init draws tensors of at least one dimension; a Hugging Face folder
  // stores it as transformers' scalar [] (the spec's hf_parts).
  torch::Tensor logit_scale;
};

}  // namespace xtrain::model

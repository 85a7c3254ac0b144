// LLaVA (transformers' LlavaForConditionalGeneration): a CLIP vision tower (model/clip/clip_vision.h),
// a projector (linear_1, GELU, linear_2, with biases) from its features to the text's width, and
// a Llama decoder (model/llama.h) as the language model. Parameter names are those of
// transformers' checkpoints (vision_tower.encoder.layers.0.self_attn.q_proj.weight,
// multi_modal_projector.linear_1.weight, language_model.model.layers.0..., language_model.lm_head.weight).
//
// Forward: Batch::extra["pixel_values"] [images, channels, size, size] go through the tower;
// the hidden states of config.vision.feature_layer (the class token dropped under "default"),
// projected, replace in order the token embeddings at the positions of image_token_index in
// input_ids (each image's placeholder already expanded to its feature count, as transformers'
// processor does); a count that differs is an error. The labels at those positions are -100 (the
// data's business). Without pixel_values the model is its language model.
//
// The tower's layers past the feature layer take no gradient (requires_grad false): the trainer
// treats them as frozen. Blocks (block_runner's indices, the shard plan's blocks): the encoder layers the selected
// features pass through, then the decoder layers. Init: the tower's as CLIP's, the projector
// ~ N(0, init_std^2) with zero biases, the language model's as llama's. Not split by tensor or
// pipeline parallelism.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "model/causal_lm.h"
#include "model/clip/clip_vision.h"
#include "model/layers/linear.h"
#include "model/llama.h"

namespace xtrain::model {

class LlavaForConditionalGeneration final : public CausalLM {
 public:
  explicit LlavaForConditionalGeneration(const ModelConfig& config);

  ModelOutput forward(const Batch& batch) override;
  torch::Tensor output_weight() const override { return language_model->output_weight(); }
  InitPlan init_plan() const override;
  // The vision blocks and the decoder layers each a unit; the rest (the tower's embeddings and
  // norms, encoder layers past the feature layer, the projector, the token table, the final norm
  // and output projection) one root unit, gathered for the whole pass: the tower's embeddings and
  // the projector are used between blocks, and the table both first and last when tied.
  ShardPlan shard_plan() override;
  // The decoder's attention kernels (the tower's attention is bidirectional and not swapped).
  std::vector<AttentionKernel*> attention_kernels() override { return language_model->attention_kernels(); }
  int64_t vision_blocks() const override { return config().vision.feature_depth(); }
  // The language model's (the tower has no fused path).
  void set_fused_kernels(bool fused) override { language_model->set_fused_kernels(fused); }
  std::vector<std::pair<std::string, MoeBlockImpl*>> moe_blocks() const override;
  std::vector<EmbeddingImpl*> lookup_tables() override;
  // The tower's, the projector's and the language model's (its head stays in high precision).
  void float8_layers(const std::string& name, Float8Layers& layers) override;

  // The projected features of pixel_values, image after image: [images * features_per_image, hidden].
  torch::Tensor image_features(const torch::Tensor& pixel_values);

  ClipVision vision_tower{nullptr};
  Linear linear_1{nullptr}, linear_2{nullptr};  // multi_modal_projector
  std::shared_ptr<LlamaForCausalLM> language_model;
};

// The language model's own config: the text fields, family llama, no vision.
ModelConfig llava_text_config(const ModelConfig& config);

}  // namespace xtrain::model

// BERT (transformers' BertForMaskedLM): word, position and token-type embeddings summed and
// layer-normed; N post-LN encoder layers [bidirectional attention with biases -> dense ->
// residual -> LayerNorm, GELU MLP -> residual -> LayerNorm]; the masked-LM head (dense, GELU,
// LayerNorm, then the word embeddings as output projection, always tied, plus a bias). Parameter names
// are Hugging Face's (bert.encoder.layer.0.attention.self.query.weight, ..., cls.predictions.bias).
//
// Attention is bidirectional within a document: keys where Batch::extra["attention_mask"]
// ([B, T], 0 at padding) is 0 are masked, and a packed layout confines each token to its own
// document, whose positions restart at 0. forward() gives the head's transformed hidden states:
// the loss multiplies them by output_weight() and adds output_bias(), as for the decoders, and
// counts only the positions whose label is not -100 (the masked tokens).
//
// Dropout (model.dropout, training only: Batch::dropout defined) where transformers applies it:
// after the embeddings' LayerNorm, on the attention probabilities (attention then takes the
// eager path, which materialises them, instead of SDPA) and on each sublayer's output before its
// residual add; its masks are keyed (model/layers/keyed_dropout.h).
//
// Init as BERT's: every weight ~ N(0, init_std^2), biases 0, LayerNorm gains 1. Split into
// pipeline stages by layer (forward_chunk): every stage holds the embeddings and the head, one
// unit, the first stage reading the embeddings and the last the head. Tensor parallelism
// (parallel.tp, without sequence parallelism), Megatron's split: query, key and value by heads,
// the intermediate layer by width, the two dense layers after them by rows (their biases added
// once after the ranks' sums), the word embeddings and the prediction bias by vocabulary rows (a
// vocabulary-parallel lookup and loss); the rest whole. A rank's attention dropout masks are its
// heads' of one process's; the hidden dropout falls on whole states.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include "model/causal_lm.h"
#include "model/layers/keyed_dropout.h"
#include "model/layers/layer_norm.h"
#include "model/layers/linear.h"
#include "model/layers/tensor_parallel_ops.h"

namespace xtrain::model {

class BertLayerImpl : public torch::nn::Module, public Float8User {
 public:
  // index: the layer's place in the encoder, which keys its dropout masks.
  BertLayerImpl(const ModelConfig& config, int64_t index);
  // mask: bool [B, 1, T, T], true where a query may attend to a key; dropout: the training
  // step's key (undefined: none).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask, const DropoutKey& dropout = {});
  void describe_init(const std::string& name, double std, InitPlan& plan) const;
  void float8_layers(const std::string& name, Float8Layers& layers) override;  // attention and MLP projections
  // This rank's slices under tensor parallelism, by name under `name`, and its first global head.
  void tensor_parallel_plan(const std::string& name, int64_t rank, int64_t ranks, TensorParallelPlan& plan) const;
  int64_t first_head() const;

  std::shared_ptr<TensorParallelOps> tensor_parallel;  // null: every head and the whole width
  Linear query{nullptr}, key{nullptr}, value{nullptr}, attention_dense{nullptr};
  LayerNorm attention_norm{nullptr};
  Linear intermediate{nullptr}, output_dense{nullptr};
  LayerNorm output_norm{nullptr};

 private:
  torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                          const torch::Tensor& mask, const DropoutKey& dropout) const;

  int64_t num_heads_, head_dim_, index_;
  double dropout_;
};
TORCH_MODULE(BertLayer);

class BertForMaskedLM final : public CausalLM {
 public:
  explicit BertForMaskedLM(const ModelConfig& config);

  ModelOutput forward(const Batch& batch) override;
  ModelOutput forward_chunk(const Batch& batch, const torch::Tensor& hidden, int64_t first_layer, int64_t last_layer,
                            bool embed, bool head) override;
  torch::Tensor output_weight() const override;
  torch::Tensor output_bias() const override { return prediction_bias; }
  InitPlan init_plan() const override;
  // The embeddings and the head as one unit (they share the word embeddings), each layer its own.
  ShardPlan shard_plan() override;
  std::vector<AttentionKernel*> attention_kernels() override { return {}; }
  std::vector<EmbeddingImpl*> lookup_tables() override {
    return {word_embeddings.get(), position_embeddings.get(), token_type_embeddings.get()};
  }
  // Each encoder layer's and the head's transform (the tied output projection stays in high precision).
  void float8_layers(const std::string& name, Float8Layers& layers) override;
  TensorParallelPlan tensor_parallel_plan(int64_t rank, int64_t ranks) const override;
  void use_tensor_parallel(std::shared_ptr<TensorParallelOps> ops) override;

  Embedding word_embeddings{nullptr}, position_embeddings{nullptr}, token_type_embeddings{nullptr};
  LayerNorm embeddings_norm{nullptr};
  torch::nn::ModuleList layers{nullptr};  // bert.encoder.layer: the modules of `blocks`, for their names
  std::vector<BertLayer> blocks;
  torch::Tensor prediction_bias;
  Linear transform{nullptr};
  LayerNorm transform_norm{nullptr};

 private:
  torch::Tensor look_up(const Batch& batch);  // the embeddings' sum, normed (and dropped)
};

// The encoder's attention mask for a batch: bool [B, 1, T, T].
torch::Tensor encoder_attention_mask(const Batch& batch);

}  // namespace xtrain::model

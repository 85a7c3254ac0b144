// T5 (transformers' T5ForConditionalGeneration): an encoder and a decoder of pre-norm blocks
// over one shared token embedding. Each block normalises its input with T5's layer norm (an
// RMS norm: no mean subtracted, no bias) before each sublayer and adds the sublayer's output to
// the residual stream: the encoder's blocks self-attend bidirectionally, the decoder's
// self-attend causally, then attend to the encoder's output (cross-attention), then pass the
// feed-forward layer. Attention has no biases and its scores are not scaled by 1/sqrt(d_kv);
// positions enter as a learned bias per head added to the scores, looked up by the bucket of
// the key's offset from the query (relative_position_bucket), from one table per stack held by
// its first block and shared by every block of the stack (cross-attention has none). Each
// stack ends with its own final norm.
//
// Two styles, by ModelConfig: v1.0 (tie_embeddings, feed_forward relu): DenseReluDense wi, wo
// with ReLU, and the output projection is the shared embedding, applied to the decoder's
// states times d_model^-0.5; v1.1 (feed_forward gated-gelu, untied): wi_0, wi_1, wo with
// GELU(tanh)(x wi_0) * (x wi_1), and lm_head its own matrix, unscaled.
//
// The Batch: input_ids are the encoder's [B, S] (extra["attention_mask"], 0 at padding, masks
// keys of the encoder's attention and of cross-attention), decoder_input_ids the decoder's
// [B, T], labels [B, T] the decoder's targets (the model never reads them). forward() gives
// the decoder's final states (scaled when tied): the loss multiplies them by output_weight().
// Parameter names are Hugging Face's (shared.weight, encoder.block.0.layer.0.SelfAttention.q.weight, ...).
//
// block_runner sees the encoder's blocks as blocks 0 .. num_layers - 1 and the decoder's after
// them; a decoder block's tensor is its states and the encoder's output side by side, [B, T + S,
// H]. The embedding, both relative-position tables (read by every block of their stack), the
// final norms and lm_head form the root unit of the shard plan, each block its own unit. Init as transformers' (initializer_factor 1): the embedding and lm_head
// N(0, 1), q N(0, 1/(d_model d_kv)), k and v N(0, 1/d_model), o N(0, 1/(heads d_kv)), wi
// N(0, 1/d_model), wo N(0, 1/d_ff), the position tables N(0, 1/d_model), norms 1.
// Dropout (model.dropout, training only: Batch::dropout defined) where transformers' T5 applies
// dropout_rate: after each stack's embedding lookup, on the attention probabilities (self and
// cross), inside the feed-forward layer after its activation, on each sublayer's output before
// the residual add, and after each stack's final norm. Its masks are keyed
// (model/layers/keyed_dropout.h): Batch::dropout keys the rows [encoder input | decoder input]
// (as the data holds them), each stack its own columns, each block by its block_runner index.
// Tensor parallelism (parallel.tp, without sequence parallelism), Megatron's split: each
// attention's q, k, v by heads and o by rows, each stack's position table by heads (a rank adds
// its heads' bias), the feed-forward layer's wi (wi_0, wi_1) by columns and wo by rows, the
// shared embedding and lm_head by vocabulary rows (a vocabulary-parallel lookup and loss); the
// norms are replicated. A rank's dropout masks are its heads' and features' of one process's.
// Pipeline parallelism cuts the blocks, numbered encoder first, into chunks as it cuts a
// decoder's (config/pipeline_layout.h; the embedding and the head one slot each): the encoder's
// chunks hand on its states [B, S, H]; the chunk that runs the decoder's first block applies the
// encoder's final norm and sets the decoder's embedded input beside it, and from there the
// chunks hand on [B, T + S, H], as between blocks. Every stage holds the root unit (the shared
// table, both position tables, the final norms, lm_head), its copies' gradients summed over the
// pipeline (ShardPlan::head_read_by_every_stage). Megatron instead gives the encoder and the
// decoder stages of their own (pipeline_model_parallel_split_rank); one cut rule serves here.
// No context parallelism, experts or packed rows (the recipe refuses them).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include "model/causal_lm.h"
#include "model/layers/keyed_dropout.h"
#include "model/layers/linear.h"
#include "model/layers/rms_norm.h"
#include "model/layers/tensor_parallel_ops.h"

namespace xtrain::model {

// T5's bucket of each relative position (key position minus query position), as Mesh
// TensorFlow's: bidirectional stacks give half the buckets to positive offsets; of each half,
// the first half are exact offsets, the rest logarithmically wider up to max_distance, beyond
// which all offsets share the last bucket; causal stacks bucket only the offsets to the past.
torch::Tensor relative_position_bucket(const torch::Tensor& relative_position, bool bidirectional, int64_t num_buckets,
                                       int64_t max_distance);

class T5AttentionImpl : public torch::nn::Module {
 public:
  T5AttentionImpl(const ModelConfig& config, bool relative_bias);
  // x [B, T, d_model] attends to `memory` [B, S, d_model] (x itself for self-attention);
  // bias: added to the scores, [1 or B, heads, T, S] (undefined: none); keep: bool,
  // broadcastable to [B, heads, T, S], true where a key may be attended to; dropout: applied to
  // the probabilities [B, heads, T, S] (empty: none).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& memory, const torch::Tensor& bias,
                        const torch::Tensor& keep, const std::function<torch::Tensor(torch::Tensor)>& dropout = {});
  void describe_init(const std::string& name, InitPlan& plan) const;
  // This rank's slices under tensor parallelism, by name under `name`, and its first global head.
  void tensor_parallel_plan(const std::string& name, int64_t rank, int64_t ranks, TensorParallelPlan& plan) const;
  int64_t first_head() const;

  Linear q{nullptr}, k{nullptr}, v{nullptr}, o{nullptr};
  Embedding relative_attention_bias{nullptr};  // the stack's table [buckets, heads], first block only
  std::shared_ptr<TensorParallelOps> tensor_parallel;  // null: every head

 private:
  int64_t heads_, d_kv_, d_model_;
};
TORCH_MODULE(T5Attention);

class T5FeedForwardImpl : public torch::nn::Module {
 public:
  explicit T5FeedForwardImpl(const ModelConfig& config);
  // dropout: applied to the activation, before wo.
  torch::Tensor forward(const torch::Tensor& x, const std::function<torch::Tensor(torch::Tensor)>& dropout = {});
  void describe_init(const std::string& name, InitPlan& plan) const;
  // This rank's slices under tensor parallelism, by name under `name`, and its first global
  // feature of the activation.
  void tensor_parallel_plan(const std::string& name, int64_t rank, int64_t ranks, TensorParallelPlan& plan) const;
  int64_t first_feature() const;

  Linear wi{nullptr}, wi_0{nullptr}, wi_1{nullptr}, wo{nullptr};  // wi (relu) or wi_0, wi_1 (gated-gelu)
  std::shared_ptr<TensorParallelOps> tensor_parallel;  // null: the whole width

 private:
  int64_t d_model_, d_ff_;
};
TORCH_MODULE(T5FeedForward);

// One block: layer.0 self-attention, (decoder) layer.1 cross-attention, then the feed-forward
// layer, each behind its layer_norm.
class T5BlockImpl : public torch::nn::Module {
 public:
  T5BlockImpl(const ModelConfig& config, bool decoder, bool relative_bias);
  // keep: the self-attention's mask; memory and memory_keep: the encoder's output and the
  // cross-attention's mask (decoder only). dropout: the key of the block's tokens (the
  // decoder's own for a decoder block), memory_dropout the encoder's (decoder only); layer:
  // the block's index, which keys its masks.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& bias, const torch::Tensor& keep,
                        const torch::Tensor& memory, const torch::Tensor& memory_keep, const DropoutKey& dropout = {},
                        const DropoutKey& memory_dropout = {}, int64_t layer = 0);
  void describe_init(const std::string& name, InitPlan& plan) const;
  void float8_layers(const std::string& name, Float8Layers& layers);
  void tensor_parallel_plan(const std::string& name, int64_t rank, int64_t ranks, TensorParallelPlan& plan) const;
  void use_tensor_parallel(const std::shared_ptr<TensorParallelOps>& ops);

  T5Attention self_attention{nullptr}, cross_attention{nullptr};
  RMSNorm self_norm{nullptr}, cross_norm{nullptr}, ff_norm{nullptr};
  T5FeedForward feed_forward{nullptr};

 private:
  double dropout_;
};
TORCH_MODULE(T5Block);

class T5ForConditionalGeneration final : public CausalLM {
 public:
  explicit T5ForConditionalGeneration(const ModelConfig& config);

  ModelOutput forward(const Batch& batch) override;
  // Blocks are numbered encoder first (block_runner's indices); see the header's comment on pipelines.
  ModelOutput forward_chunk(const Batch& batch, const torch::Tensor& hidden, int64_t first_layer, int64_t last_layer,
                            bool embed, bool head) override;
  torch::Tensor output_weight() const override;
  InitPlan init_plan() const override;
  ShardPlan shard_plan() override;
  std::vector<AttentionKernel*> attention_kernels() override { return {}; }
  std::vector<EmbeddingImpl*> lookup_tables() override { return {shared.get()}; }
  // Every attention and feed-forward projection (the tied or untied head stays in high precision).
  void float8_layers(const std::string& name, Float8Layers& layers) override;
  TensorParallelPlan tensor_parallel_plan(int64_t rank, int64_t ranks) const override;
  void use_tensor_parallel(std::shared_ptr<TensorParallelOps> ops) override;

  Embedding shared{nullptr};
  torch::nn::ModuleList encoder_layers{nullptr}, decoder_layers{nullptr};  // encoder.block, decoder.block
  std::vector<T5Block> encoder_blocks, decoder_blocks;
  RMSNorm encoder_norm{nullptr}, decoder_norm{nullptr};
  Linear lm_head{nullptr};  // untied only

 private:
  // What every chunk of a step derives alike from the batch: the lengths (encoder S, decoder T),
  // the cross-attention's and encoder's key mask, the decoder's causal mask and each stack's
  // dropout key.
  struct StepInputs {
    int64_t s = 0, t = 0;
    torch::Tensor memory_keep, causal;
    DropoutKey key, decoder_key;
  };
  StepInputs step_inputs(const Batch& batch) const;
  // The stack's relative-position bias [1, heads, queries, keys] from its first block's table.
  torch::Tensor position_bias(T5Block first, int64_t queries, int64_t keys, bool bidirectional);
  // The stack's blocks [begin, end) on x (a decoder's: its states and the encoder's output side by side).
  torch::Tensor run_blocks(bool decoder, int64_t begin, int64_t end, torch::Tensor x, const StepInputs& in);
};

}  // namespace xtrain::model

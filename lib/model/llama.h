// The Llama-style decoder of the llama, qwen2, qwen3, deepseek_v3 and gpt_oss families: token
// embedding, N x [RMSNorm -> attention with RoPE -> residual, RMSNorm -> SwiGLU or experts ->
// residual], final RMSNorm, output projection (optionally tied to the embedding). The families
// differ in the parts of their layers (model/decoder_layer.h's DecoderParts: DeepSeek's in
// model/deepseek/, GPT-OSS's in model/gpt_oss/), and DeepSeek-V3 adds prediction depths
// (model/deepseek/multi_token_prediction.h). Parameter names equal Hugging
// Face's LlamaForCausalLM (model.layers.0.self_attn.q_proj.weight, ..., lm_head.weight), so a
// state dict maps 1:1 onto an HF checkpoint.
//
// With config.num_experts > 0 (qwen3_moe) the MoE layers' feed-forward is a MoeBlock, and the
// forward's auxiliary losses are the load-balancing loss and the router z-loss, each the mean
// over the MoE layers times its coefficient (none when the coefficient is 0).
//
// Init (init_plan, each layer describing its own parameters): every embedding and linear
// weight ~ N(0, init_std^2), except the two projections that write into the residual stream
// (o_proj, down_proj), which use init_std / sqrt(2 * num_layers) so that the residual variance
// does not grow with depth (GPT-2, Megatron); biases 0, norm weights 1.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include "model/causal_lm.h"
#include "model/decoder_layer.h"
#include "model/deepseek/multi_token_prediction.h"
#include "model/layers/linear.h"
#include "model/layers/rms_norm.h"

namespace xtrain::model {

// The body: embeddings, blocks, final norm (HF's LlamaModel).
class LlamaBodyImpl : public torch::nn::Module {
 public:
  LlamaBodyImpl(const ModelConfig& config, const DecoderParts& parts);
  // input_ids: [B, T] int64 -> final hidden states [B, T, hidden]. A packed layout describes
  // every row (in practice one row of several documents, see data/micro_batch.h); its
  // documents, not T, must fit in max_seq_len. The runners are the CausalLM's hooks.
  torch::Tensor forward(const torch::Tensor& input_ids, const SequenceLayout& layout, const BlockRunner& block_runner,
                        const EmbedRunner& embed_runner, double loss_weight = 1.0,
                        const torch::Tensor& balance_coefficients = {});  // [layers, E], row i layer i's
  // Its parts, for pipeline chunks and multi-token prediction: the token lookup, and layers
  // [first, last) on x.
  torch::Tensor embed(const torch::Tensor& input_ids, const EmbedRunner& embed_runner);
  const RotaryTables& rotary() const { return rotary_; }
  // Refuses documents longer than max_seq_len.
  void check_length(const torch::Tensor& input_ids, const SequenceLayout& layout) const;
  torch::Tensor run_layers(torch::Tensor x, const SequenceLayout& layout, const BlockRunner& block_runner,
                           int64_t first, int64_t last, double loss_weight, const torch::Tensor& balance_coefficients);

  // Adds a layer after the others (a prediction depth).
  void append_layer(std::shared_ptr<DecoderLayerImpl> layer);

  Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};  // the modules of `blocks`, for their names
  std::vector<std::shared_ptr<DecoderLayerImpl>> blocks;
  RMSNorm norm{nullptr};
  // Set while a forward reads a key/value cache: its tokens are new ones, which the cache places.
  bool caching_ = false;

 private:
  ModelConfig config_;
  RotaryTables rotary_;
};
TORCH_MODULE(LlamaBody);

class LlamaForCausalLM final : public CausalLM {
 public:
  LlamaForCausalLM(const ModelConfig& config, const AttentionFeatures& features);

  // With batch.kv_cache, only the new tokens (model/attention/kv_cache.h).
  ModelOutput forward(const Batch& batch) override;
  // Every layer's attention reads it, and there are no prediction depths.
  bool reads_kv_cache() const override;
  torch::Tensor output_weight() const override;
  InitPlan init_plan() const override;
  // The token embedding (none when tied: the one table then lives in the head's unit), each
  // decoder layer, and the rest (final norm and output projection, or with tied embeddings the
  // shared table too).
  ShardPlan shard_plan() override;
  std::vector<AttentionKernel*> attention_kernels() override;
  // Every block's, the prediction depths' included (they are blocks: QK-clip clips them too).
  std::vector<std::pair<std::string, AttentionLayer*>> attention_layers() override;
  // Megatron's split: attention by heads, the MLP by its intermediate dimension, the embedding
  // and the output projection by vocabulary rows; norms replicated. MoE layers: the experts by
  // expert, the router replicated, shared experts as the MLP (model/layers/moe.h).
  TensorParallelPlan tensor_parallel_plan(int64_t rank, int64_t ranks) const override;
  void use_tensor_parallel(std::shared_ptr<TensorParallelOps> ops) override;
  // With experts, the chunk's MoE layers' routing figures as forward() reports them: rows of
  // every MoE layer of the model (zeros for layers of other chunks) and the chunk's share of
  // each router loss. The deferred balancing loss needs every layer's counts: refused. The head
  // chunk's layers end with the prediction depths (config/pipeline_layout.h), which run after
  // the final norm as in forward, their states in mtp_hidden.
  ModelOutput forward_chunk(const Batch& batch, const torch::Tensor& hidden, int64_t first_layer, int64_t last_layer,
                            bool embed, bool head) override;

  // Every norm's, MLP's, attention's and expert block's choice.
  void set_fused_kernels(bool fused) override;
  std::vector<std::pair<std::string, MoeBlockImpl*>> moe_blocks() const override;
  std::vector<EmbeddingImpl*> lookup_tables() override { return {model->embed_tokens.get()}; }
  // Each decoder layer's and prediction depth's; lm_head stays in high precision.
  void float8_layers(const std::string& name, Float8Layers& layers) override;

  LlamaBody model{nullptr};
  Linear lm_head{nullptr};  // null when embeddings are tied

 private:
  ModelOutput cached_forward(const Batch& batch);

  std::unique_ptr<MultiTokenPrediction> mtp_;  // with model.mtp_layers
};

}  // namespace xtrain::model

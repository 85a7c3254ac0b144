// The Llama-style decoder of the llama, qwen2 and qwen3 families: token embedding, N x [RMSNorm
// -> GQA attention with RoPE -> residual, RMSNorm -> SwiGLU -> residual], final RMSNorm, output
// projection (optionally tied to the embedding). The families differ in attention only
// (AttentionFeatures, from their specs in model/spec/llama_family.h). Parameter names equal Hugging
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
#include <vector>

#include <string>

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include "model/attention/attention.h"
#include "model/causal_lm.h"
#include "model/deepseek/latent_attention.h"
#include "model/layers/linear.h"
#include "model/layers/moe.h"
#include "model/layers/rms_norm.h"
#include "model/layers/swiglu.h"

namespace xtrain::model {

class DecoderLayerImpl : public torch::nn::Module {
 public:
  // layer: its index, which decides whether its feed-forward is dense or MoE.
  DecoderLayerImpl(const ModelConfig& config, const AttentionFeatures& features, int64_t layer = 0);
  // loss_weight: the batch's (Batch::loss_weight), which a MoE layer's router losses take as
  // their gradient weight inside this layer's backward (model/layers/aux_loss.h).
  // balance_coefficients: when the balancing loss is deferred (transformers' scope, or the global
  // average), the [E] gradient of it with respect to this layer's summed router probabilities,
  // filled in by the model after its forward (model/layers/aux_loss.h); undefined otherwise.
  torch::Tensor forward(const torch::Tensor& x, const RotaryTables& rotary, const SequenceLayout& layout = {},
                        double loss_weight = 1.0, const torch::Tensor& balance_coefficients = {});
  virtual void describe_init(const std::string& name, double std, double output_std, InitPlan& plan) const;

  RMSNorm input_layernorm{nullptr};
  Attention self_attn{nullptr};  // grouped-query attention, registered as "self_attn"
  LatentAttention latent_attn{nullptr};  // multi-head latent attention (deepseek_v3), as "self_attn" instead
  AttentionKernel& attention_kernel() { return self_attn ? self_attn->kernel : latent_attn->kernel; }
  RMSNorm post_attention_layernorm{nullptr};
  SwiGLU mlp{nullptr};  // a dense layer's feed-forward, registered as "mlp"
  MoeBlock moe{nullptr};  // a MoE layer's, registered as "mlp" instead
  // What a MoE layer reports of a forward, detached, for the log and the expert bias.
  struct RoutingReport {
    torch::Tensor balance, z;  // its share of each router loss (undefined when its coefficient is 0)
    torch::Tensor load;        // [E] tokens routed to each expert
    torch::Tensor prob_sums;   // [E] router probabilities summed over the tokens
    double tokens = 0;
    double dropped = 0;
  };
  // While set (during the model's forward, not during a recompute's replay), a MoE layer writes
  // its report here.
  RoutingReport* report = nullptr;

 private:
  // Each router loss's coefficient over the number of MoE layers (their mean), and top k.
  double balance_coef_ = 0, z_coef_ = 0;
  int64_t top_k_ = 0;
};
TORCH_MODULE(DecoderLayer);

// The output head's own norm of a multi-token prediction depth (DeepSeek's shared_head.norm;
// the head's weight is the model's).
class SharedHeadImpl : public torch::nn::Module {
 public:
  SharedHeadImpl(int64_t hidden_size, double eps);
  RMSNorm norm{nullptr};
};
TORCH_MODULE(SharedHead);

// A multi-token prediction depth (DeepSeek-V3 section 2.2, with the names of its checkpoints,
// model.layers.{num_layers + k - 1}.*): a decoder layer whose input is
// eh_proj([enorm(embedding of the token k ahead); hnorm(previous depth's states)]), the
// previous depth being the decoder's final normed states for k = 1, as DeepSeek's inference
// engines feed it. Its states, normed by shared_head.norm, go through the model's output head.
class MtpLayerImpl : public DecoderLayerImpl {
 public:
  MtpLayerImpl(const ModelConfig& config, const AttentionFeatures& features, int64_t layer);
  // The states this depth passes on (before shared_head.norm), from the previous depth's and the
  // embeddings of the tokens k ahead ([B, T, hidden] each).
  // pair: [embedded; previous] along the features ([B, T, 2 hidden]), one tensor so that a block
  // runner (FSDP's gather, recompute) wraps the whole depth. Returns [states; shared_head.norm of
  // them] the same way.
  torch::Tensor forward_ahead(const torch::Tensor& pair, const RotaryTables& rotary, const SequenceLayout& layout,
                              double loss_weight, const torch::Tensor& balance_coefficients);
  void describe_init(const std::string& name, double std, double output_std, InitPlan& plan) const override;

  RMSNorm enorm{nullptr}, hnorm{nullptr};
  Linear eh_proj{nullptr};  // [hidden, 2 hidden]: the embedding's half first
  SharedHead shared_head{nullptr};
};
TORCH_MODULE(MtpLayer);

// The body: embeddings, blocks, final norm (HF's LlamaModel).
class LlamaBodyImpl : public torch::nn::Module {
 public:
  LlamaBodyImpl(const ModelConfig& config, const AttentionFeatures& features);
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

  Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  RMSNorm norm{nullptr};

 private:
  ModelConfig config_;
  RotaryTables rotary_;
};
TORCH_MODULE(LlamaBody);

class LlamaForCausalLM final : public CausalLM {
 public:
  LlamaForCausalLM(const ModelConfig& config, const AttentionFeatures& features);

  ModelOutput forward(const Batch& batch) override;
  torch::Tensor output_weight() const override;
  InitPlan init_plan() const override;
  // The token embedding (none when tied: the one table then lives in the head's unit), each
  // decoder layer, and the rest (final norm and output projection, or with tied embeddings the
  // shared table too).
  ShardPlan shard_plan() override;
  std::vector<AttentionKernel*> attention_kernels() override;
  // Megatron's split: attention by heads, the MLP by its intermediate dimension, the embedding
  // and the output projection by vocabulary rows; norms replicated. MoE layers: the experts by
  // expert, the router replicated, shared experts as the MLP (model/layers/moe.h).
  TensorParallelPlan tensor_parallel_plan(int64_t rank, int64_t ranks) const override;
  void use_tensor_parallel(std::shared_ptr<TensorParallelOps> ops) override;
  // With experts, the chunk's MoE layers' routing figures as forward() reports them: rows of
  // every MoE layer of the model (zeros for layers of other chunks) and the chunk's share of
  // each router loss. The deferred balancing loss needs every layer's counts: refused.
  ModelOutput forward_chunk(const Batch& batch, const torch::Tensor& hidden, int64_t first_layer, int64_t last_layer,
                            bool embed, bool head) override;

  LlamaBody model{nullptr};
  Linear lm_head{nullptr};  // null when embeddings are tied

 private:
  // Depths 1..mtp_layers of multi-token prediction on the decoder's final states `main`
  // (model/model_output.h's mtp_hidden), their token lookups `embedded` [D, B, T, hidden].
  std::vector<torch::Tensor> predict_ahead(const Batch& batch, torch::Tensor previous, const torch::Tensor& embedded,
                                           const torch::Tensor& balance_coefficients);
  torch::Tensor fill_balance_coefficients(const torch::Tensor& coefficients, const std::vector<int64_t>& moe_layers,
                                          const torch::Tensor& counts, const torch::Tensor& prob_sums,
                                          double tokens) const;
  void chunk_routing(const std::vector<DecoderLayerImpl::RoutingReport>& reports, int64_t first_layer,
                     const torch::Device& device, ModelOutput& output) const;
};

}  // namespace xtrain::model

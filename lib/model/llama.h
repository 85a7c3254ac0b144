// The Llama-style decoder: token embedding, N x [RMSNorm -> GQA attention with RoPE ->
// residual, RMSNorm -> SwiGLU -> residual], final RMSNorm, output projection (optionally
// tied to the embedding). Parameter names equal Hugging Face's LlamaForCausalLM
// (model.layers.0.self_attn.q_proj.weight, ..., lm_head.weight), so a state dict maps 1:1
// onto an HF checkpoint.
//
// Init (init_weights, each layer initialising its own parameters): every embedding and linear
// weight ~ N(0, init_std^2), except the two projections that write into the residual stream
// (o_proj, down_proj), which use init_std / sqrt(2 * num_layers) so that the residual variance
// does not grow with depth (GPT-2, Megatron); biases 0, norm weights 1.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/pimpl.h>

#include "model/attention.h"
#include "model/llama_config.h"
#include "model/rms_norm.h"
#include "model/swiglu.h"

namespace xtrain::model {

// Parameters grouped into the units that FSDP gathers and reduces together.
struct ShardPlan {
  struct Unit {
    std::string name;
    std::vector<std::pair<std::string, torch::Tensor>> parameters;  // full names, model order
  };
  std::optional<Unit> embedding;
  std::vector<Unit> blocks;
  Unit head;
};

class DecoderLayerImpl : public torch::nn::Module {
 public:
  explicit DecoderLayerImpl(const LlamaConfig& config);
  torch::Tensor forward(const torch::Tensor& x, const RotaryTables& rotary, const SequenceLayout& layout = {});
  void init_weights(double std, double output_std);

  RMSNorm input_layernorm{nullptr};
  Attention self_attn{nullptr};
  RMSNorm post_attention_layernorm{nullptr};
  SwiGLU mlp{nullptr};
};
TORCH_MODULE(DecoderLayer);

// Runs block `layer` on x; `block` is the plain forward. Memory policies install one to
// recompute or offload blocks without the model knowing about them.
using BlockRunner = std::function<torch::Tensor(int64_t layer, const torch::Tensor& x,
                                                const std::function<torch::Tensor(const torch::Tensor&)>& block)>;

// Runs the token embedding on input ids; `embed` is the plain lookup. Data parallelism installs
// one to shard the embedding table.
using EmbedRunner = std::function<torch::Tensor(const torch::Tensor& input_ids,
                                                const std::function<torch::Tensor(const torch::Tensor&)>& embed)>;

// The body: embeddings, blocks, final norm (HF's LlamaModel).
class LlamaBodyImpl : public torch::nn::Module {
 public:
  explicit LlamaBodyImpl(const LlamaConfig& config);
  // input_ids: [B, T] int64 -> final hidden states [B, T, hidden]. A packed layout describes
  // every row (in practice one row of several documents, see data/micro_batch.h); its
  // documents, not T, must fit in max_seq_len.
  torch::Tensor forward(const torch::Tensor& input_ids, const SequenceLayout& layout = {});

  BlockRunner block_runner;  // empty: run every block directly
  EmbedRunner embed_runner;  // empty: look the ids up directly

  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  RMSNorm norm{nullptr};

 private:
  LlamaConfig config_;
  RotaryTables rotary_;
};
TORCH_MODULE(LlamaBody);

class LlamaForCausalLMImpl : public torch::nn::Module {
 public:
  explicit LlamaForCausalLMImpl(const LlamaConfig& config);

  // input_ids: [B, T] -> logits [B, T, vocab].
  torch::Tensor forward(const torch::Tensor& input_ids, const SequenceLayout& layout = {});
  // Weight of the output projection [vocab, hidden] (the embedding when tied).
  torch::Tensor output_weight() const;

  // Draws in the order of named_parameters(), so that one seed gives one set of weights.
  void init_weights();
  // The model's FSDP units, by its module tree: the token embedding (none when tied: the one
  // table then lives in the head's unit), each decoder layer, and the rest (final norm and
  // output projection, or with tied embeddings the shared table too).
  ShardPlan shard_plan();
  int64_t num_parameters() const;
  const LlamaConfig& config() const { return config_; }

  LlamaBody model{nullptr};
  torch::nn::Linear lm_head{nullptr};  // null when embeddings are tied

 private:
  LlamaConfig config_;
};
TORCH_MODULE(LlamaForCausalLM);

// Mean next-token cross-entropy. tokens: [B, T + 1]; the model sees tokens[:, :-1] and is
// scored on tokens[:, 1:].
torch::Tensor next_token_loss(LlamaForCausalLM& model, const torch::Tensor& tokens);

// Parameters that get weight decay: matrices (embeddings, projections), not norm gains.
bool decays(const std::string& parameter_name, const torch::Tensor& parameter);

}  // namespace xtrain::model

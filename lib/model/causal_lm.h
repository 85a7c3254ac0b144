// CausalLM: what the engine needs of a language model (a decoder, or an encoder trained on
// masked tokens: the loss is the same cross-entropy on labelled positions), and nothing of its
// layers. Training, evaluation, generation, memory policies and FSDP work on this interface
// only; each family implements it (model/llama.h, model/bert/bert.h) and is found through its
// ModelSpec (model/spec/model_spec.h).
//
// A model is built without parameter storage and materialised from a ParameterSource
// (model/layers/parameter_source.h): whole on one process, shard by shard under FSDP.
//
// A model knows nothing of parallelism or memory policies; they reach into its forward through
// two hooks: block_runner runs each block (recompute, offload and FSDP wrap it), embed_runner
// runs the token lookup (FSDP gathers the table around it).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>

#include "model/attention/attention.h"
#include "model/batch.h"
#include "model/spec/model_config.h"
#include "model/model_output.h"
#include "model/layers/float8_user.h"
#include "model/layers/fused_kernel_user.h"
#include "model/layers/linear.h"
#include "model/layers/parameter_init.h"
#include "model/shard_plan.h"
#include "model/layers/tensor_parallel_ops.h"

namespace xtrain::model {

class MoeBlockImpl;

using BlockFn = std::function<torch::Tensor(const torch::Tensor&)>;
// Runs block `layer` on x; `block` is the plain forward.
using BlockRunner = std::function<torch::Tensor(int64_t layer, const torch::Tensor& x, const BlockFn& block)>;
// Runs the token embedding on input ids; `embed` is the plain lookup.
using EmbedRunner = std::function<torch::Tensor(const torch::Tensor& input_ids, const BlockFn& embed)>;

class CausalLM : public torch::nn::Module, public FusedKernelUser, public LookupTableOwner, public Float8User {
 public:
  // The hidden states that the output projection turns into logits, and the auxiliary losses.
  virtual ModelOutput forward(const Batch& batch) = 0;
  // Weight of the output projection [vocab, hidden] (the embedding table when tied), and its
  // bias [vocab] (undefined: none; an encoder's masked-LM head has one).
  virtual torch::Tensor output_weight() const = 0;
  virtual torch::Tensor output_bias() const { return {}; }
  // How each parameter is drawn at a random init, from the module tree (model/layers/parameter_init.h).
  virtual InitPlan init_plan() const = 0;
  virtual ShardPlan shard_plan() = 0;
  // The kernel slot of every attention layer, in layer order (memory policies swap kernels).
  virtual std::vector<AttentionKernel*> attention_kernels() = 0;
  // Every decoder layer's self-attention, by module name, in layer order (QK-clip records and
  // scales them); none by default (a family without decoder self-attention).
  virtual std::vector<std::pair<std::string, AttentionLayer*>> attention_layers() { return {}; }
  // How many of block_runner's blocks, numbered first, belong to a vision tower (llava's encoder
  // layers); the decoder's layers follow them.
  virtual int64_t vision_blocks() const { return 0; }

  // Tensor parallelism, for the families whose spec has Capabilities::tensor_parallel: the slice
  // of each split parameter on rank `rank` of `ranks` (an InputError-worthy
  // std::invalid_argument when the shape does not split), and installing the group's ops in the
  // layers once the parameters are sliced (parallel/tensor_parallel_plan.h). Under it, forward's
  // hidden states are whole on every rank and output_weight() holds this rank's rows of the
  // vocabulary, from vocab_first(). The recipe check refuses parallel.tp for the other families,
  // so reaching this base is a logic error.
  virtual TensorParallelPlan tensor_parallel_plan(int64_t rank, int64_t ranks) const;
  virtual void use_tensor_parallel(std::shared_ptr<TensorParallelOps> ops);
  const std::shared_ptr<TensorParallelOps>& tensor_parallel() const { return tensor_parallel_; }

  // A pipeline chunk's forward, for the families whose spec has Capabilities::pipeline: the token
  // embedding of batch.input_ids when `embed` (else `hidden` is the input), layers
  // [first_layer, last_layer), then when `head` the final norm. ModelOutput::hidden is the
  // chunk's output (on the last chunk what forward's would be); the auxiliary losses and expert
  // figures are the chunk's layers' share of forward's, in the same names and shapes on every
  // chunk, so that summing them over the chunks gives forward's. As above, the base is reached
  // only by a logic error.
  virtual ModelOutput forward_chunk(const Batch& batch, const torch::Tensor& hidden, int64_t first_layer,
                                    int64_t last_layer, bool embed, bool head);
  int64_t vocab_first() const;

  // The model's mixture-of-experts blocks, by module name, in layer order (none in a dense
  // model, the default): expert parallelism shards their experts and installs their
  // dispatchers, the trainer balances their loads. A family lists its own layers' blocks.
  virtual std::vector<std::pair<std::string, MoeBlockImpl*>> moe_blocks() const { return {}; }
  // The fused kernels of the family's layers (model/kernel_choice.h); none by default.
  void set_fused_kernels(bool) override {}
  // Every token and position table of the family (model/layers/linear.h).
  std::vector<EmbeddingImpl*> lookup_tables() override = 0;
  // The layers precision.fp8 converts, each family its own (model/layers/float8_user.h): every
  // linear layer but the output head and the gates, and every expert block.
  void float8_layers(const std::string& name, Float8Layers& layers) override = 0;

  // Whether forward reads Batch::kv_cache (model/batch.h); a family without it refuses it.
  virtual bool reads_kv_cache() const { return false; }

  // logits [B, T, vocab] of the batch (evaluation and generation; training runs the chunked loss).
  torch::Tensor logits(const Batch& batch);
  const ModelConfig& config() const { return config_; }
  int64_t num_parameters() const;
  // Those one token passes through: of each MoE layer's experts, top_k of num_experts.
  int64_t num_active_parameters() const;

  BlockRunner block_runner;  // empty: run every block directly
  EmbedRunner embed_runner;  // empty: look the ids up directly
  // Sums a tensor over the data-parallel ranks in place, for statistics of the global batch (a
  // balancing loss over it); empty: this rank's alone.
  std::function<void(torch::Tensor&)> sum_over_data_ranks;
  // The same over the ranks that hold other tokens of the same micro batch (context
  // parallelism), for statistics of the micro batch; empty: none.
  std::function<void(torch::Tensor&)> sum_over_context_ranks;
  // The rows of a tensor of every data-parallel rank, concatenated in rank order, whose backward
  // sums the gradients of this rank's rows over the ranks (open_clip's gather_with_grad): a
  // contrastive loss's negatives from the global batch. Empty: this rank's rows alone.
  std::function<torch::Tensor(const torch::Tensor&)> gather_over_data_ranks;
  // The dropout key of the forward that runs last, which LoRA adapters with dropout read
  // (model/layers/lora.h): a family that takes adapters sets it from Batch::dropout as its
  // forward starts (undefined in evaluation and generation) and leaves it for the backward, whose
  // recomputed blocks must draw the forward's masks.
  std::shared_ptr<DropoutKey> adapter_dropout_key() const { return adapter_dropout_key_; }

 protected:
  explicit CausalLM(ModelConfig config) : config_(std::move(config)) {}

  std::shared_ptr<TensorParallelOps> tensor_parallel_;
  std::shared_ptr<DropoutKey> adapter_dropout_key_ = std::make_shared<DropoutKey>();

 private:
  ModelConfig config_;
};

// Mean next-token cross-entropy. tokens: [B, T + 1]; the model sees tokens[:, :-1] and is
// scored on tokens[:, 1:].
torch::Tensor next_token_loss(CausalLM& model, const torch::Tensor& tokens);

}  // namespace xtrain::model

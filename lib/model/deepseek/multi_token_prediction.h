// Multi-token prediction (DeepSeek-V3 section 2.2, with the names of its checkpoints): depth k of
// model.mtp_layers predicts the token k ahead of the next one. Its layer,
// model.layers.{num_layers + k - 1}.*, is a decoder layer whose input is
// eh_proj([enorm(embedding of the token k ahead); hnorm(previous depth's states)]), the previous
// depth being the decoder's final normed states for k = 1, as DeepSeek's inference engines feed
// it. Its states, normed by shared_head.norm, go through the model's output head.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "model/batch.h"
#include "model/causal_lm.h"
#include "model/decoder_layer.h"
#include "model/layers/linear.h"
#include "model/layers/rms_norm.h"
#include "model/layers/tensor_parallel_ops.h"
#include "model/model_output.h"

namespace xtrain::model {

class LlamaBodyImpl;

// The output head's own norm of a depth (DeepSeek's shared_head.norm; the head's weight is the
// model's).
class SharedHeadImpl : public torch::nn::Module {
 public:
  SharedHeadImpl(int64_t hidden_size, double eps);
  RMSNorm norm{nullptr};
};
TORCH_MODULE(SharedHead);

class MtpLayerImpl : public DecoderLayerImpl {
 public:
  MtpLayerImpl(const ModelConfig& config, const DecoderParts& parts, int64_t layer);
  // The states this depth passes on (before shared_head.norm), from the previous depth's and the
  // embeddings of the tokens k ahead ([B, T, hidden] each).
  // pair: [embedded; previous] along the features ([B, T, 2 hidden]), one tensor so that a block
  // runner (FSDP's gather, recompute) wraps the whole depth. Returns [states; shared_head.norm of
  // them] the same way.
  torch::Tensor forward_ahead(const torch::Tensor& pair, const RotaryTables& rotary, const SequenceLayout& layout,
                              double loss_weight, const torch::Tensor& balance_coefficients);
  void describe_init(const std::string& name, double std, double output_std, InitPlan& plan) const override;
  void set_fused_kernels(bool fused) override;
  void float8_layers(const std::string& name, Float8Layers& layers) override;  // the decoder layer's and eh_proj

  RMSNorm enorm{nullptr}, hnorm{nullptr};
  Linear eh_proj{nullptr};  // [hidden, 2 hidden]: the embedding's half first
  SharedHead shared_head{nullptr};
  // With sequence parallelism: eh_proj sees this rank's part of the sequence, its gradient a part.
  std::shared_ptr<TensorParallelOps> partial_gradient;
};
TORCH_MODULE(MtpLayer);

// Depth k's input ids: position i holds token i + k of input_ids' row ([B, T]), 0 past the end
// (where no target is counted).
torch::Tensor ids_ahead(const torch::Tensor& input_ids, int64_t k);

// A decoder's prediction depths, which follow its layers in the body's layer list.
class MultiTokenPrediction {
 public:
  // Appends config.mtp_layers depths to body's layers.
  MultiTokenPrediction(const ModelConfig& config, const DecoderParts& parts, LlamaBodyImpl& body);
  // The decoder's final states (output.hidden) and each depth's (output.mtp_hidden), from one
  // lookup of the tokens and of the tokens each depth looks ahead to (batch.ids_ahead when set,
  // else ids_ahead of batch.input_ids), so that a sharded embedding is gathered once.
  // balance_coefficients: as LlamaBodyImpl::run_layers takes them.
  void forward(LlamaBodyImpl& body, const Batch& batch, const BlockRunner& block_runner,
               const EmbedRunner& embed_runner, const torch::Tensor& balance_coefficients, ModelOutput& output) const;
  // A pipeline's head chunk: each depth's states (output.mtp_hidden) on the decoder's final
  // states `hidden`, the tokens ahead looked up in the last stage's copy of the table. The
  // lookups are forward's, row by row, so the states are too.
  std::vector<torch::Tensor> forward_after(LlamaBodyImpl& body, const Batch& batch, const BlockRunner& block_runner,
                                           const EmbedRunner& embed_runner, const torch::Tensor& hidden,
                                           const torch::Tensor& balance_coefficients) const;
  // Under tensor parallelism (the decoder layers' parts are set by the model): the depths' own
  // norms and eh_proj, replicated, sum their partial gradients when the sequence is split.
  void use_tensor_parallel(const std::shared_ptr<TensorParallelOps>& ops);

 private:
  // Depths 1..D on the decoder's final states `previous`, their token lookups `embedded` [D, B, T, hidden].
  std::vector<torch::Tensor> predict_ahead(LlamaBodyImpl& body, const Batch& batch, const BlockRunner& block_runner,
                                           torch::Tensor previous, const torch::Tensor& embedded,
                                           const torch::Tensor& balance_coefficients) const;

  int64_t num_layers_;
  std::vector<MtpLayer> depths_;
};

}  // namespace xtrain::model

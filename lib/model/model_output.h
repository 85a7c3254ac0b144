// ModelOutput: what a model's forward returns. `hidden` is the input of the output projection
// (CausalLM::output_weight()), so that the loss can run chunked and never hold the full logits.
// Auxiliary losses (a router's load-balancing or z-loss) come out by name, already multiplied
// by their coefficients, detached: their gradients, weighed by Batch::loss_weight, flow inside
// the blocks that computed them (model/layers/aux_loss.h), so that FSDP's per-block backward and
// recompute give them. The trainer only logs them, as aux_loss.NAME.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

namespace xtrain::model {

struct ModelOutput {
  torch::Tensor hidden;  // [B, T, hidden]
  std::vector<std::pair<std::string, torch::Tensor>> aux_losses;  // scalars, in the model's order
  // Mixtures of experts, one row per MoE layer in model order (undefined without experts): the
  // tokens routed to each expert, counted before any capacity drop (fp32 [L, E]), and the
  // choices dropped over capacity (fp32 [L]). The trainer sums them over micro batches and
  // ranks for the expert bias and the balance metrics.
  torch::Tensor expert_load, dropped;
  // Multi-token prediction (ModelConfig::mtp_layers): depth k's states for the shared output
  // head, [B, T, hidden], in depth order; position i predicts the target k positions after its
  // own, labels[i + k] (train/training_loss.h). Empty without it.
  std::vector<torch::Tensor> mtp_hidden;
  // A family that computes its own training loss (clip's contrastive loss, a scalar whose
  // backward gives the parameters' gradients): the loss itself, which the trainer takes in place
  // of the cross entropy of `hidden`. Undefined for every other family.
  torch::Tensor loss;
};

}  // namespace xtrain::model

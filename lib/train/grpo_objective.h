// The GRPO objective on one micro batch of completions (data.objective grpo): the policy's
// per-token log-probabilities of the completion tokens (logits divided by the sampling
// temperature, as TRL's _get_per_token_logps_and_entropies), then grpo_loss (train/grpo_loss.h)
// with the micro batch's advantages, old and reference log-probabilities that the rollout made
// (train/grpo_rollout.h). The training step weighs every micro batch by 1 / (the step's micro
// batches over all ranks): loss() returns the grpo_loss term times that count, so the weighted
// sum over micro batches and ranks is TRL's loss of the step, and so is the step's reported loss.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/recipe.h"
#include "data/micro_batch.h"
#include "model/causal_lm.h"
#include "train/grpo_loss.h"
#include "train/training_loss.h"

namespace xtrain::train {

// One micro batch of a rollout: rows prompt + completion, right-padded; targets are the
// completion's tokens (EOS included), kIgnoreIndex elsewhere; target_count 1 (see above).
struct GrpoMicroBatch {
  data::MicroBatch batch;
  torch::Tensor advantages;  // float32 [B]
  torch::Tensor old_logps;   // [B, T] the rollout policy's, or undefined (one step per rollout)
  torch::Tensor ref_logps;   // [B, T] the reference's, or undefined (grpo.beta 0)
};

// This rank's micro batches of one optimizer step, and where they stand in it.
struct GrpoStepBatch {
  std::vector<GrpoMicroBatch> micro;
  GrpoStepShare share;
};

// The recipe's grpo section as grpo_loss's settings.
GrpoSettings grpo_settings(const config::Recipe& recipe);

// Per target position, the log-probability of the target under logits / temperature: [B, T]
// float32, 0 where the target is kIgnoreIndex.
torch::Tensor target_token_log_probs(model::CausalLM& model, const torch::Tensor& hidden,
                                     const torch::Tensor& labels, double temperature);

// The names of grpo_loss's metrics, reported as objective metrics.
bool is_grpo_loss_metric(const std::string& name);

class GrpoObjective {
 public:
  GrpoObjective(GrpoSettings settings, double temperature) : settings_(settings), temperature_(temperature) {}

  // The policy's term on micro batch `index` of `step` (its model input `batch`), with the
  // model's auxiliary losses and grpo_loss's metrics beside it.
  BatchLoss loss(model::CausalLM& policy, const model::Batch& batch, const GrpoStepBatch& step, int64_t index) const;

 private:
  GrpoSettings settings_;
  double temperature_;
};

}  // namespace xtrain::train

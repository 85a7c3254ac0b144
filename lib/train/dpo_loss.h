// The DPO objective (data.objective dpo) on a micro batch of preference pairs, rows 2i chosen and
// 2i + 1 rejected (data/preference_dataset.h): each row's log-probability of its completion is
// the sum over its targets, for the policy and, without gradient, for the frozen reference. The
// loss is TRL's DPOTrainer's, averaged over the pairs: sigmoid, -log sigma(beta x delta) where
// delta is the chosen minus the rejected log-ratio (with label_smoothing e, conservative DPO:
// (1 - e) times that plus e times -log sigma(-beta x delta)); ipo, (delta' - 1 / (2 beta))^2 where
// delta' divides each log-ratio by its completion's token count. The metrics are TRL's names.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/recipe.h"
#include "model/causal_lm.h"
#include "train/training_loss.h"

namespace xtrain::train {

struct DpoSettings {
  config::DpoLoss loss = config::DpoLoss::sigmoid;
  double beta = 0.1;
  double label_smoothing = 0;
};

// Per row, the sum of the log-probabilities of its targets (labels not -100): float32 [B].
torch::Tensor completion_log_probs(model::CausalLM& model, const model::Batch& batch);

struct DpoTerms {
  torch::Tensor loss;  // mean over the pairs
  // rewards/chosen, rewards/rejected, rewards/accuracies, rewards/margins, logps/chosen,
  // logps/rejected: means over the pairs, detached.
  std::vector<std::pair<std::string, torch::Tensor>> metrics;
};

// The loss of the rows' policy and reference log-probabilities ([B], chosen and rejected
// interleaved) and their completions' token counts.
DpoTerms dpo_terms(const torch::Tensor& policy, const torch::Tensor& reference, const torch::Tensor& tokens,
                   const DpoSettings& settings);

// The names of dpo_terms' metrics, in order.
const std::vector<std::string>& dpo_metric_names();

class DpoObjective {
 public:
  // `reference`: whole on this rank, materialised, not trained.
  DpoObjective(std::shared_ptr<model::CausalLM> reference, DpoSettings settings);

  // The policy's loss on `batch` with the metrics beside the model's own auxiliary losses.
  BatchLoss loss(model::CausalLM& policy, const model::Batch& batch);

 private:
  std::shared_ptr<model::CausalLM> reference_;
  DpoSettings settings_;
};

// The objective of a dpo recipe: the reference built as the recipe's model and filled with its
// initial weights (model.init_from's folder, or run.seed's init, whether or not the run resumes),
// or with dpo.reference's folder (hf:DIR), whole on `device`.
std::unique_ptr<DpoObjective> make_dpo_objective(const config::Recipe& recipe, const torch::Device& device);

}  // namespace xtrain::train

#include "train/grpo_objective.h"

#include <torch/torch.h>

#include "data/sample_dataset.h"

namespace xtrain::train {

namespace F = torch::nn::functional;

GrpoSettings grpo_settings(const config::Recipe& recipe) {
  const auto& g = recipe.grpo;
  GrpoSettings settings;
  switch (g.loss_type) {
    case config::GrpoLoss::grpo: settings.aggregation = GrpoAggregation::grpo; break;
    case config::GrpoLoss::bnpo: settings.aggregation = GrpoAggregation::bnpo; break;
    case config::GrpoLoss::dr_grpo: settings.aggregation = GrpoAggregation::dr_grpo; break;
    case config::GrpoLoss::dapo: settings.aggregation = GrpoAggregation::dapo; break;
  }
  settings.epsilon_low = g.epsilon;
  settings.epsilon_high = g.epsilon_high > 0 ? g.epsilon_high : g.epsilon;
  settings.beta = g.beta;
  settings.ratio_level = g.importance_sampling_level == config::GrpoRatioLevel::sequence ? GrpoRatioLevel::sequence
                                                                                          : GrpoRatioLevel::token;
  settings.max_completion_length = g.max_new_tokens;
  return settings;
}

torch::Tensor target_token_log_probs(model::CausalLM& model, const torch::Tensor& hidden,
                                     const torch::Tensor& labels, double temperature) {
  auto logits = F::linear(hidden, model.output_weight(), model.output_bias()).to(torch::kFloat32);
  if (temperature > 0 && temperature != 1.0) logits = logits / temperature;
  const auto picked = logits.log_softmax(-1).gather(-1, labels.clamp_min(0).unsqueeze(-1)).squeeze(-1);
  // Zeros where nothing is scored: the ratios and the KL there are then exactly 0, never inf x 0.
  return picked * labels.ne(data::kIgnoreIndex).to(torch::kFloat32);
}

bool is_grpo_loss_metric(const std::string& name) { return name == "kl" || name.rfind("clip_ratio/", 0) == 0; }

BatchLoss GrpoObjective::loss(model::CausalLM& policy, const model::Batch& batch, const GrpoStepBatch& step,
                              int64_t index) const {
  const auto& micro = step.micro.at(static_cast<size_t>(index));
  auto output = policy.forward(batch);
  const auto logps = target_token_log_probs(policy, output.hidden, batch.labels, temperature_);
  const auto mask = batch.labels.ne(data::kIgnoreIndex).to(torch::kFloat32);
  const auto device = logps.device();
  auto on_device = [&](const torch::Tensor& t) { return t.defined() ? t.to(device) : t; };
  auto terms = grpo_loss(logps, on_device(micro.old_logps), on_device(micro.ref_logps), on_device(micro.advantages),
                         mask, settings_, step.share);
  BatchLoss result{terms.loss * static_cast<double>(step.share.micro_batches), std::move(output.aux_losses),
                   output.expert_load, output.dropped, {}};
  for (auto& metric : terms.metrics) result.aux_losses.push_back(std::move(metric));
  return result;
}

}  // namespace xtrain::train

#include "train/dpo_loss.h"

#include <torch/torch.h>

#include "data/sample_dataset.h"
#include "model/layers/parameter_source.h"
#include "train/model_factory.h"

namespace xtrain::train {

namespace F = torch::nn::functional;
using torch::indexing::None;
using torch::indexing::Slice;

namespace {
// The whole vocabulary's logits of the rows, in float32 as TRL's: preference rows are short.
torch::Tensor sum_of_target_log_probs(model::CausalLM& model, const torch::Tensor& hidden,
                                      const torch::Tensor& labels) {
  const auto logits = F::linear(hidden, model.output_weight(), model.output_bias());
  const auto log_probs = logits.to(torch::kFloat32).log_softmax(-1);
  const auto picked = log_probs.gather(-1, labels.clamp_min(0).unsqueeze(-1)).squeeze(-1);
  return (picked * labels.ne(data::kIgnoreIndex).to(picked.scalar_type())).sum(1);
}
}  // namespace

torch::Tensor completion_log_probs(model::CausalLM& model, const model::Batch& batch) {
  return sum_of_target_log_probs(model, model.forward(batch).hidden, batch.labels);
}

const std::vector<std::string>& dpo_metric_names() {
  static const std::vector<std::string> names{"rewards/chosen",  "rewards/rejected", "rewards/accuracies",
                                              "rewards/margins", "logps/chosen",     "logps/rejected"};
  return names;
}

DpoTerms dpo_terms(const torch::Tensor& policy, const torch::Tensor& reference, const torch::Tensor& tokens,
                   const DpoSettings& settings) {
  const auto chosen = Slice(0, None, 2), rejected = Slice(1, None, 2);
  const auto ratios = policy - reference.detach();
  const auto chosen_ratio = ratios.index({chosen}), rejected_ratio = ratios.index({rejected});
  const double beta = settings.beta;
  torch::Tensor per_pair;
  if (settings.loss == config::DpoLoss::ipo) {
    const auto counts = tokens.to(ratios.scalar_type()).clamp_min(1.0);
    const auto delta = chosen_ratio / counts.index({chosen}) - rejected_ratio / counts.index({rejected});
    per_pair = (delta - 1.0 / (2.0 * beta)).square();
  } else {
    const auto delta = chosen_ratio - rejected_ratio;
    const double e = settings.label_smoothing;
    per_pair = -F::logsigmoid(beta * delta) * (1.0 - e);
    if (e != 0) per_pair = per_pair - F::logsigmoid(-beta * delta) * e;
  }
  DpoTerms terms;
  terms.loss = per_pair.mean();
  const auto chosen_rewards = beta * chosen_ratio.detach(), rejected_rewards = beta * rejected_ratio.detach();
  const auto detached = policy.detach();
  const std::vector<torch::Tensor> values{chosen_rewards.mean(),
                                          rejected_rewards.mean(),
                                          chosen_rewards.gt(rejected_rewards).to(torch::kFloat32).mean(),
                                          (chosen_rewards - rejected_rewards).mean(),
                                          detached.index({chosen}).mean(),
                                          detached.index({rejected}).mean()};
  for (size_t i = 0; i < values.size(); ++i) terms.metrics.emplace_back(dpo_metric_names()[i], values[i]);
  return terms;
}

DpoObjective::DpoObjective(std::shared_ptr<model::CausalLM> reference, DpoSettings settings)
    : reference_(std::move(reference)), settings_(settings) {
  reference_->eval();
  for (auto& parameter : reference_->parameters()) parameter.set_requires_grad(false);
}

BatchLoss DpoObjective::loss(model::CausalLM& policy, const model::Batch& batch) {
  torch::Tensor reference;
  {
    torch::NoGradGuard no_grad;
    reference = completion_log_probs(*reference_, batch);
  }
  auto output = policy.forward(batch);
  const auto logps = sum_of_target_log_probs(policy, output.hidden, batch.labels);
  auto terms = dpo_terms(logps, reference, batch.labels.ne(data::kIgnoreIndex).sum(1), settings_);
  BatchLoss result{terms.loss, std::move(output.aux_losses), output.expert_load, output.dropped, {}};
  for (auto& metric : terms.metrics) result.aux_losses.push_back(std::move(metric));
  return result;
}

std::unique_ptr<DpoObjective> make_dpo_objective(const config::Recipe& recipe, const torch::Device& device) {
  auto source = recipe;
  if (!recipe.dpo.reference.empty()) source.model.init_from = recipe.dpo.reference;
  auto reference = build_model(source);
  model::place_unmaterialized(*reference, device);
  model::materialize(*reference, initial_weights(source, *reference, /*fresh=*/true).source);
  return std::make_unique<DpoObjective>(std::move(reference),
                                        DpoSettings{recipe.dpo.loss, recipe.dpo.beta, recipe.dpo.label_smoothing});
}

}  // namespace xtrain::train

#include "train/grpo_loss.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>
#include <torch/torch.h>

namespace xtrain::train {

namespace {

void check_inputs(const torch::Tensor& logps, const torch::Tensor& old_logps, const torch::Tensor& ref_logps,
                  const torch::Tensor& advantages, const torch::Tensor& mask, const GrpoSettings& settings,
                  const GrpoStepShare& share) {
  if (!logps.defined() || logps.dim() != 2)
    throw std::invalid_argument("grpo_loss: the policy's log-probabilities must be [completions, tokens]");
  const auto shape = logps.sizes();
  if (!mask.defined() || mask.sizes() != shape)
    throw std::invalid_argument(fmt::format("grpo_loss: the completion mask must be [{}, {}]", shape[0], shape[1]));
  if (old_logps.defined() && old_logps.sizes() != shape)
    throw std::invalid_argument("grpo_loss: the old policy's log-probabilities must have the policy's shape");
  if (settings.beta != 0 && (!ref_logps.defined() || ref_logps.sizes() != shape))
    throw std::invalid_argument(
        "grpo_loss: beta is not 0: the reference's log-probabilities must have the policy's shape");
  if (!advantages.defined() || advantages.dim() != 1 || advantages.size(0) != shape[0])
    throw std::invalid_argument(fmt::format("grpo_loss: the advantages must be [{}], one a completion", shape[0]));
  if (settings.aggregation == GrpoAggregation::dr_grpo && settings.max_completion_length < 1)
    throw std::invalid_argument("grpo_loss: dr_grpo divides by max_completion_length, which must be at least 1");
  if (share.micro_batches < 1) throw std::invalid_argument("grpo_loss: micro_batches must be at least 1");
}

// TRL's masked_seq_mean: each completion's mean over its tokens ([B, 1]: already one a completion).
torch::Tensor completion_means(const torch::Tensor& x, const torch::Tensor& mask) {
  if (x.size(1) == 1) return x.squeeze(1);
  return (x * mask).sum(-1) / mask.sum(-1);
}

// TRL's global_masked_mean on one process: the token mean ([B, 1]: the completion mean).
torch::Tensor token_mean(const torch::Tensor& x, const torch::Tensor& mask) {
  if (x.size(1) == 1) return x.sum() / static_cast<double>(x.size(0));
  return (x * mask).sum() / mask.sum().clamp_min(1.0);
}

// TRL's nanmin and nanmax: over the completions that have tokens (the others' means are NaN).
torch::Tensor least_or_most(const torch::Tensor& x, bool most) {
  const auto kept = x.masked_select(x.isnan().logical_not());
  if (kept.numel() == 0) return torch::scalar_tensor(std::numeric_limits<double>::quiet_NaN(), x.options());
  return most ? kept.max() : kept.min();
}

// The per-token loss summed and normalised as settings.aggregation (GrpoStepShare).
torch::Tensor aggregate(const torch::Tensor& per_token, const torch::Tensor& mask, const GrpoSettings& settings,
                        const GrpoStepShare& share) {
  const auto masked = per_token * mask;
  const auto micro_batches = static_cast<double>(share.micro_batches);
  switch (settings.aggregation) {
    case GrpoAggregation::grpo:
      return (masked.sum(-1) / mask.sum(-1).clamp_min(1.0)).mean() / micro_batches;
    case GrpoAggregation::bnpo:
      return masked.sum() / mask.sum().clamp_min(1.0) / micro_batches;
    case GrpoAggregation::dr_grpo:
      return masked.sum() /
             (static_cast<double>(per_token.size(0)) * static_cast<double>(settings.max_completion_length)) /
             micro_batches;
    case GrpoAggregation::dapo: {
      const double tokens = share.step_tokens > 0 ? share.step_tokens : mask.sum().item<double>();
      return masked.sum() / std::max(tokens, 1.0);
    }
  }
  throw std::logic_error("grpo_loss: unknown aggregation");
}

// TRL's nanstd: the Bessel-corrected std over `dim` (all elements when dim < 0), kept dims.
torch::Tensor bessel_std(const torch::Tensor& x, int64_t dim) {
  const auto mean = dim < 0 ? x.mean() : x.mean(dim, /*keepdim=*/true);
  auto variance = dim < 0 ? (x - mean).square().mean() : (x - mean).square().mean(dim, true);
  const auto count = static_cast<double>(dim < 0 ? x.numel() : x.size(dim));
  const auto correction = torch::scalar_tensor(count, x.options()) / torch::scalar_tensor(count - 1, x.options());
  return (variance * correction).sqrt();
}

}  // namespace

GrpoTerms grpo_loss(const torch::Tensor& logps, const torch::Tensor& old_logps, const torch::Tensor& ref_logps,
                    const torch::Tensor& advantages, const torch::Tensor& mask, const GrpoSettings& settings,
                    const GrpoStepShare& share) {
  check_inputs(logps, old_logps, ref_logps, advantages, mask, settings, share);
  const auto m = mask.to(logps.scalar_type());
  const auto a = advantages.unsqueeze(1);
  const auto log_ratio = logps - (old_logps.defined() ? old_logps.detach() : logps.detach());
  auto log_weights = log_ratio;
  if (settings.ratio_level == GrpoRatioLevel::sequence)
    log_weights = ((log_ratio * m).sum(-1) / m.sum(-1).clamp_min(1.0)).unsqueeze(-1);
  const auto ratio = log_weights.exp();
  torch::Tensor kl;
  if (settings.beta != 0) {
    const auto ref = ref_logps.detach();
    kl = (ref - logps).exp() - (ref - logps) - 1;
    if (settings.kl_times_ratio) kl = kl * ratio;
  }
  const double low = 1 - settings.epsilon_low, high = 1 + settings.epsilon_high;
  const auto clipped = ratio.clamp(low, high);
  auto per_token = -torch::minimum(ratio * a, clipped * a);
  if (settings.beta != 0) per_token = per_token + settings.beta * kl;

  GrpoTerms terms;
  terms.loss = aggregate(per_token, m, settings, share);
  torch::NoGradGuard no_grad;
  if (settings.beta != 0) terms.metrics.emplace_back("kl", token_mean(kl.detach(), m));
  const auto r = ratio.detach();
  const auto low_clipped = r.lt(low).logical_and(a.lt(0)), high_clipped = r.gt(high).logical_and(a.gt(0));
  const auto as_float = [&](const torch::Tensor& flags) { return flags.to(m.scalar_type()); };
  terms.metrics.emplace_back("clip_ratio/low_mean", token_mean(as_float(low_clipped), m));
  terms.metrics.emplace_back("clip_ratio/high_mean", token_mean(as_float(high_clipped), m));
  terms.metrics.emplace_back("clip_ratio/region_mean", token_mean(as_float(low_clipped.logical_or(high_clipped)), m));
  terms.metrics.emplace_back("clip_ratio/low_min", least_or_most(completion_means(as_float(low_clipped), m), false));
  terms.metrics.emplace_back("clip_ratio/high_max", least_or_most(completion_means(as_float(high_clipped), m), true));
  return terms;
}

GrpoAdvantages grpo_advantages(const torch::Tensor& rewards, int64_t group_size, GrpoRewardScale scale) {
  if (!rewards.defined() || rewards.dim() != 1 || !rewards.is_floating_point())
    throw std::invalid_argument("grpo_advantages: the rewards must be a float vector, one a completion");
  if (group_size < 2 || rewards.size(0) % group_size != 0)
    throw std::invalid_argument(fmt::format(
        "grpo_advantages: {} completions do not make groups of {} (at least 2 completions a prompt)", rewards.size(0),
        group_size));
  torch::NoGradGuard no_grad;
  const auto grouped = rewards.view({-1, group_size});
  const auto mean = grouped.mean(1).repeat_interleave(group_size);
  // "none" divides by nothing, but its groups' std still counts the groups of equal rewards (TRL's).
  const auto spread = scale == GrpoRewardScale::batch
                          ? bessel_std(rewards, -1).expand_as(rewards)
                          : bessel_std(grouped, 1).squeeze(1).repeat_interleave(group_size);
  auto advantages = rewards - mean;
  if (scale != GrpoRewardScale::none) advantages = advantages / (spread + 1e-4);
  const auto zero_std = torch::isclose(spread, torch::zeros_like(spread));
  GrpoAdvantages result{advantages, {}};
  result.metrics.emplace_back("reward", rewards.mean());
  result.metrics.emplace_back("reward_std", bessel_std(rewards, -1));
  result.metrics.emplace_back("frac_reward_zero_std", zero_std.to(rewards.scalar_type()).mean());
  return result;
}

}  // namespace xtrain::train

// The loss side of GRPO, term for term TRL's GRPOTrainer (trl 1.16.0, _compute_loss and the
// advantages of _generate_and_score_completions): the completions' advantages from their rewards
// normalised within groups of the same prompt, and the clipped-ratio policy loss with an optional
// k3 KL penalty to a frozen reference, aggregated as one of TRL's loss types. Inputs are the
// completions' per-token log-probabilities [B, T] (the policy's with gradient; the old policy's and
// the reference's without) and the completion mask [B, T] (1 on completion tokens, 0 on padding).
// Rollouts, rewards and the training loop that feeds these are not here.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

namespace xtrain::train {

// TRL's loss_type values offered here; how each normalises is at GrpoStepShare.
enum class GrpoAggregation { grpo, bnpo, dr_grpo, dapo };
// TRL's importance_sampling_level: a ratio per token, or one per completion (GSPO: the exp of the
// mean log-ratio over its tokens).
enum class GrpoRatioLevel { token, sequence };
// TRL's scale_rewards: divide by the group's std, the whole batch's std, or not at all.
enum class GrpoRewardScale { group, batch, none };

struct GrpoSettings {
  GrpoAggregation aggregation = GrpoAggregation::dapo;  // TRL's default loss_type
  double epsilon_low = 0.2, epsilon_high = 0.2;          // TRL's epsilon and epsilon_high
  double beta = 0.0;                                     // the KL's weight; 0 takes no reference
  // TRL's use_bias_correction_kl (default true): the KL term times the ratio, which changes the
  // gradient even on policy, where the ratio's value is exactly 1.
  bool kl_times_ratio = true;
  GrpoRatioLevel ratio_level = GrpoRatioLevel::token;
  int64_t max_completion_length = 0;  // dr_grpo's constant (TRL's max_completion_length)
};

// Where a micro batch stands in its optimizer step. grpo_loss returns the micro batch's term, and
// the step's gradient is the SUM of its micro batches' terms' gradients over accumulation and over
// data-parallel ranks. The normalisers are TRL's with one rollout batch per optimizer step
// (steps_per_generation = gradient_accumulation_steps) and DDP's mean over ranks:
//   grpo:    the mean over the micro batch's completions of each one's token mean, / micro_batches
//   bnpo:    the micro batch's token sum / its OWN token count, / micro_batches (TRL normalises bnpo
//            over the local micro batch, so the result depends on how the batch is split)
//   dr_grpo: the micro batch's token sum / (its completions x max_completion_length), / micro_batches
//   dapo:    the micro batch's token sum / step_tokens, the whole step's token count (TRL's
//            num_items_in_batch), so the step's loss is its token mean however it is split.
// grpo and dr_grpo equal their whole-batch values when the micro batches hold equally many
// completions (TRL's micro batches always do).
struct GrpoStepShare {
  int64_t micro_batches = 1;  // of the optimizer step, all data-parallel ranks (TRL: accumulation x processes)
  double step_tokens = 0;     // dapo's normaliser; 0: this micro batch's own token count
};

struct GrpoTerms {
  torch::Tensor loss;
  // TRL's names, detached, over this micro batch: kl (with beta only: the token mean of the KL
  // term, times the ratio where kl_times_ratio), clip_ratio/low_mean, clip_ratio/high_mean,
  // clip_ratio/region_mean (token means of the clipped tokens), clip_ratio/low_min and
  // clip_ratio/high_max (the least and most of the completions' clipped fractions: the trainer
  // joins them over the ranks as TRL does, train/grpo_clip_extrema.h).
  std::vector<std::pair<std::string, torch::Tensor>> metrics;
};

// `old_logps` undefined: the policy's own, detached (one optimizer step per rollout batch);
// `ref_logps` may be undefined when beta is 0. `advantages`: [B].
GrpoTerms grpo_loss(const torch::Tensor& logps, const torch::Tensor& old_logps, const torch::Tensor& ref_logps,
                    const torch::Tensor& advantages, const torch::Tensor& mask, const GrpoSettings& settings,
                    const GrpoStepShare& share = {});

struct GrpoAdvantages {
  torch::Tensor advantages;  // [B]
  // reward (the mean), reward_std (Bessel-corrected, as TRL's nanstd), frac_reward_zero_std (the
  // share of completions whose normalising std is 0: their group's rewards are all equal).
  std::vector<std::pair<std::string, torch::Tensor>> metrics;
};

// `rewards` [B] (finite, float), rows g x group_size ... (g + 1) x group_size - 1 one prompt's
// completions: (reward - its group's mean) / (std + 1e-4), the std Bessel-corrected and, by
// `scale`, the group's or the batch's, or no division.
GrpoAdvantages grpo_advantages(const torch::Tensor& rewards, int64_t group_size, GrpoRewardScale scale);

}  // namespace xtrain::train

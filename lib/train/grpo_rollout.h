// GRPO's rollouts (data.objective grpo): every grpo.steps_per_rollout x grpo.iterations optimizer
// steps, a rollout batch of train.global_batch_size x grpo.steps_per_rollout completions,
// grpo.num_generations per prompt, sampled from the policy's current weights (train/rollout_sampler.h),
// scored by grpo.rewards (train/rewards.h), with advantages normalised within each prompt's group
// (train/grpo_loss.h). Step k of a cycle trains on slice k mod steps_per_rollout (TRL's
// steps_per_generation and num_iterations).
//
// Completion row c of rollout r is prompt r x P + c / G's (P prompts a rollout, PromptDataset's
// order) and draws from row_generator(seed of (run.seed, r), c): the rows do not depend on the
// layout or on a global random state, so one process and any data-parallel layout sample the same
// completions, and a run resumed at a cycle's end samples the rollout the uninterrupted one did; a
// checkpoint inside a cycle keeps its rollout (train/grpo_kept_rollout.h). Data rank d of D
// samples, scores and trains on the rows of its share of each step, d x B / D ... (d + 1) x B / D - 1
// of the step's B; the rewards, the completion lengths and the step's token counts are summed
// over all ranks in one all-reduce, so every rank computes the same advantages and metrics. Under FSDP every rank runs as many
// sampling forwards as the slowest (each forward gathers parameters).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/recipe.h"
#include "data/prompt_dataset.h"
#include "parallel/parallel_model.h"
#include "train/grpo_kept_rollout.h"
#include "train/grpo_objective.h"
#include "train/rank_sums.h"
#include "train/rewards.h"
#include "text/tokenizer.h"

namespace xtrain::train {

// Where this rank stands among the data ranks, and its micro batch size.
struct GrpoLayout {
  int64_t data_rank = 0, data_ranks = 1, micro_batch_size = 1;
};

class GrpoRollouts {
 public:
  // Reads data.train's prompts (an InputError names the file and line); with grpo.beta > 0 the
  // reference is built as DPO's (the recipe's initial weights, whole on `device`).
  GrpoRollouts(const config::Recipe& recipe, const text::Tokenizer& tokenizer, const torch::Device& device);
  ~GrpoRollouts();

  int64_t prompts() const { return prompts_->size(); }

  // The batch of optimizer step `step` (from 1), sampling its rollout first where the step starts
  // one (or the rollout is not in memory, after a resume). `metrics`: the rollout's figures
  // (reward, reward_std, frac_reward_zero_std, rewards/NAME/mean, completions/mean_length,
  // completions/clipped_ratio, rollout/seconds, rollout/tokens_per_s), the same on every rank.
  const GrpoStepBatch& step_batch(int64_t step, parallel::ParallelModel& policy, RankSums& sums,
                                  const GrpoLayout& layout, std::map<std::string, double>& metrics);

  // What a checkpoint after `step` keeps of the rollout in memory: all of it where `step` lies
  // inside its cycle, nothing where it ends the cycle (the next step samples anew). Collective.
  std::optional<KeptRollout> rollout_to_keep(int64_t step, RankSums& sums) const;
  // At resume, the rollout the checkpoint in `dir` kept, if any: step_batch trains on it instead
  // of sampling. A file that does not fit the recipe is an InputError naming it.
  void restore_rollout(const std::string& dir);

 private:
  struct Sampled;
  void sample(int64_t rollout, parallel::ParallelModel& policy, RankSums& sums, const GrpoLayout& layout);
  Sampled sample_rows(int64_t rollout, model::CausalLM& policy, RankSums& sums, const GrpoLayout& layout);
  std::vector<double> score(int64_t rollout, const Sampled& sampled, RankSums& sums);
  torch::Tensor advantages(const std::vector<double>& totals);
  Sampled kept_rows(const KeptRollout& kept, const GrpoLayout& layout) const;
  void build_steps(int64_t rollout, const Sampled& sampled, const std::vector<double>& totals,
                   const torch::Tensor& advantages, model::CausalLM& policy, const GrpoLayout& layout);
  torch::Tensor logps_of(model::CausalLM& model, const data::MicroBatch& batch);
  torch::Tensor kept_logps(const data::MicroBatch& batch, const std::vector<int64_t>& rows) const;

  const config::Recipe& recipe_;
  const text::Tokenizer& tokenizer_;
  torch::Device device_;
  std::unique_ptr<data::PromptDataset> prompts_;
  RewardSet rewards_;
  std::shared_ptr<model::CausalLM> reference_;
  int64_t rollout_ = -1;  // the rollout in memory
  std::unique_ptr<Sampled> sampled_;  // its rows of this rank
  std::vector<double> totals_;        // its figures (score)
  GrpoLayout layout_;                 // the layout that sampled it
  std::unique_ptr<KeptRollout> kept_;  // from the checkpoint resumed, until its rollout is built
  std::vector<GrpoStepBatch> steps_;
  std::map<std::string, double> metrics_;
};

}  // namespace xtrain::train

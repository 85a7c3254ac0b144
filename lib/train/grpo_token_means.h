// TRL's kl and clip_ratio/{low,high,region}_mean over processes (GRPOTrainer._compute_loss, TRL
// 1.16, global_masked_mean): at each micro step every process's sum of the figure over its
// completion tokens and its token count are summed over the processes and divided (the count at
// least 1), then the step's figure is the mean over its micro steps. grpo_loss gives each micro
// batch's token mean (train/grpo_loss.h); a data rank's micro batch k is TRL's process's micro
// step k, so the step's figures pool the ranks' k-th tokens.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "train/rank_sums.h"

namespace xtrain::train {

// Whether grpo_loss's figure `name` is one of these token means.
bool is_grpo_token_mean(const std::string& name);

// From the figures' token sums, [figure][micro batch], and the tokens of each micro batch, both
// summed over the ranks already: each figure's mean over the micro batches of sum / max(tokens, 1).
std::map<std::string, double> pooled_token_means(const std::map<std::string, std::vector<double>>& sums,
                                                 const std::vector<double>& tokens);

// This rank's token means and token counts of its micro batches ([figure][micro batch] and
// [micro batch], each rank as many), weighted by `share` (0 on a rank whose figures another
// rank reports), pooled with every rank's in one all-reduce: collective.
std::map<std::string, double> token_means_over_ranks(const std::map<std::string, std::vector<double>>& means,
                                                     const std::vector<double>& tokens, double share, RankSums& sums);

}  // namespace xtrain::train

// TRL's clip_ratio/low_min and clip_ratio/high_max over processes (GRPOTrainer._compute_loss, TRL
// 1.16): at each micro step, every process's completions' clipped fractions gathered, their least
// (most), NaN ignored (NaN where all are), then the mean over the step's micro steps. grpo_loss
// gives each micro batch's own least and most (train/grpo_loss.h); a data rank's micro batch k is
// TRL's process's micro step k, so the step's figures join the ranks' k-th values.
#pragma once
#include <vector>

#include "train/rank_sums.h"

namespace xtrain::train {

// grpo_loss's names of the two figures.
inline constexpr const char* kClipLowMin = "clip_ratio/low_min";
inline constexpr const char* kClipHighMax = "clip_ratio/high_max";

struct ClipExtrema {
  double low_min = 0, high_max = 0;
};

// From every rank's figures, [rank][micro batch] (each rank as many micro batches).
ClipExtrema clip_extrema(const std::vector<std::vector<double>>& low_min,
                         const std::vector<std::vector<double>>& high_max);

// This rank's micro batches' figures joined with every other rank's, in one all-reduce: collective.
ClipExtrema clip_extrema_over_ranks(const std::vector<double>& low_min, const std::vector<double>& high_max,
                                    RankSums& sums);

}  // namespace xtrain::train

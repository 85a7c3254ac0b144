// The rollout a GRPO checkpoint keeps when it is taken inside a cycle of several optimizer steps
// (grpo.steps_per_rollout x grpo.iterations > 1, train/grpo_rollout.h): every completion row's
// tokens, the rollout's summed figures (rewards, lengths, truncations, tokens, seconds) and the
// rollout policy's log-probability of each completion token. Its later weights cannot sample or
// score that rollout again, so it is saved beside them (kKeptRolloutFile, written by rank 0 and
// covered by the manifest), and a run resumed from the checkpoint, on any layout, trains the
// cycle's remaining steps on what the uninterrupted run trained on.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/safetensors.h"
#include "train/rank_sums.h"

namespace xtrain::train {

constexpr const char* kKeptRolloutFile = "grpo_rollout.safetensors";

struct KeptRollout {
  int64_t rollout = -1;
  std::vector<double> totals;                     // GrpoRollouts' figures of every row, summed over ranks
  std::vector<std::vector<int64_t>> completions;  // by global row
  std::vector<std::vector<float>> old_logps;      // by global row, one a completion token

  ckpt::TensorMap tensors() const;
  ckpt::Metadata metadata() const;
};

// This rank's rows (global indices, their completions and log-probabilities) joined with every
// other rank's into the whole rollout of `rows` rows, in one all-reduce: collective. The
// completions' lengths come from `totals` (block 1, the same on every rank).
KeptRollout gather_kept_rollout(int64_t rollout, int64_t rows, const std::vector<double>& totals,
                                const std::vector<int64_t>& mine, const std::vector<std::vector<int64_t>>& completions,
                                const std::vector<std::vector<float>>& old_logps, RankSums& sums);

// The rollout kept in `path`, for a recipe whose rollout has `rows` rows and `totals_size`
// figures: a file of another shape is an InputError that names it and the fix.
KeptRollout read_kept_rollout(const std::string& path, int64_t rows, int64_t totals_size);

}  // namespace xtrain::train

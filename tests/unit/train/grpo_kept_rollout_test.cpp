// The rollout a GRPO checkpoint keeps inside a cycle: written and read back bit for bit, and a file
// of another shape refused with the file and the fix (tests/integration/grpo.sh resumes from it).
#include "train/grpo_kept_rollout.h"

#include "util/input_error.h"

#include <catch2/catch.hpp>
#include "scratch_dir.h"

using xtrain::train::KeptRollout;

namespace {

// Two rows of 3 and 1 completion tokens; totals: rewards, lengths, truncations, then tokens and seconds.
KeptRollout kept_two_rows() {
  return {5, {1.0, 0.0, 3.0, 1.0, 0.0, 1.0, 4.0, 0.25}, {{7, 8, 2}, {9}}, {{-0.5f, -1.25f, -3.0e-8f}, {-7.75f}}};
}

}  // namespace

TEST_CASE("a kept rollout reads back as it was written", "[grpo]") {
  xtrain::testing::ScratchDir dir;
  const auto path = (dir.path() / "grpo_rollout.safetensors").string();
  const auto kept = kept_two_rows();
  xtrain::ckpt::save_safetensors(path, kept.tensors(), kept.metadata());
  const auto read = xtrain::train::read_kept_rollout(path, 2, 8);
  CHECK(read.rollout == 5);
  CHECK(read.totals == kept.totals);
  CHECK(read.completions == kept.completions);
  CHECK(read.old_logps == kept.old_logps);  // bit for bit
}

TEST_CASE("a kept rollout of another shape names the file and the fix", "[grpo]") {
  xtrain::testing::ScratchDir dir;
  const auto path = (dir.path() / "grpo_rollout.safetensors").string();
  const auto kept = kept_two_rows();
  xtrain::ckpt::save_safetensors(path, kept.tensors(), kept.metadata());
  CHECK_THROWS_WITH(xtrain::train::read_kept_rollout(path, 4, 14),
                    path + ": a rollout of 2 completion rows and 8 figures, where the recipe's rollout has 4 rows "
                           "(train.global_batch_size x grpo.steps_per_rollout) and 14: resume with the checkpoint's "
                           "grpo and train settings");
}

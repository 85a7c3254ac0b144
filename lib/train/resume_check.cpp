#include "train/resume_check.h"

#include <fmt/format.h>

#include "util/input_error.h"

namespace xtrain::train {

std::string newest_finite_checkpoint_note(const ckpt::CheckpointStore& store) {
  try {
    const auto choice = store.newest_intact(/*strict=*/false);
    if (!choice) return "No checkpoint was written yet";
    return fmt::format("The newest checkpoint that verifies and holds only finite weights and optimizer state "
                       "(checked now) is {}",
                       choice->dir);
  } catch (const InputError& e) {
    return fmt::format("No checkpoint passes {} ({})", ckpt::kResumableChecks, e.what());
  }
}

}  // namespace xtrain::train

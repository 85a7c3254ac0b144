// What a run that stops on non-finite steps can say about its checkpoints: a claim that one
// holds finite weights is made only after checking it (ckpt::check_resumable), never assumed
// from `latest`, which may be a damaged checkpoint the run skipped.
#pragma once
#include <string>

#include "ckpt/checkpoint.h"

namespace xtrain::train {

// "The newest checkpoint that verifies and holds only finite weights and optimizer state
// (checked now) is DIR", or why there is none.
std::string newest_finite_checkpoint_note(const ckpt::CheckpointStore& store);

}  // namespace xtrain::train

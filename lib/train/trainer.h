// The training run: data -> a Schedule of forward/backward passes over this rank's micro
// batches (lib/train/schedule.h) -> clip -> AdamW -> log, evaluate and checkpoint, on one process
// or as one rank of a data-parallel mesh; resumes bit-exactly from a checkpoint of any layout.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/recipe.h"

namespace xtrain::train {

struct TrainOptions {
  // End cleanly after this step with a checkpoint (0: run to train.steps). The schedule is
  // still that of train.steps, so a later run resumes as if never stopped.
  int64_t stop_at_step = 0;
  // Recipe keys whose change since the checkpoint breaks bit-exact resume but is wanted anyway.
  std::vector<std::string> allow_changed;
  // Every such key at once (run.seed, the data source, its order and geometry).
  bool allow_data_change = false;
  // Set up everything (data, mesh, the model materialised and sharded, the optimizer, a
  // checkpoint resumed), report the memory it took, and exit 0 without training or writing.
  bool setup_only = false;
};

// Returns the process exit code: 0, or kExitStopped after a stop signal or a STOP file (a
// checkpoint was written). Bad input throws InputError before the run folder is touched; a run
// that diverges, runs out of memory or cannot write its checkpoint throws a runtime error.
int train(const config::Recipe& recipe, const TrainOptions& options);

// `xtrain eval`: loss and perplexity of a checkpoint (default: the run's latest) on data.eval.
int evaluate_checkpoint(const config::Recipe& recipe, const std::string& checkpoint_dir);

}  // namespace xtrain::train

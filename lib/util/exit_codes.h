// The exit codes of every xtrain command, the same in one process, under `xtrain launch`, under
// torchrun and under srun:
//   0   done;
//   1   a runtime failure (a crash, a diverging run, out of memory, a failed write, a dead peer);
//   2   bad input (recipe, arguments, data, checkpoint): the message names the file and the fix;
//   75  stopped cleanly by a stop signal or a STOP file after every rank saved a checkpoint at the
//       same step: run the same command again to continue (EX_TEMPFAIL, "try again later").
#pragma once

namespace xtrain {

constexpr int kExitRuntimeFailure = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitStopped = 75;

}  // namespace xtrain

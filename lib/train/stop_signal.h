// A clean stop: the signals of train.stop_signals (TERM, INT and USR1 by default: Ctrl-C, a
// scheduler's preemption, SLURM's --signal warning before a time limit) or a file
// <run.dir>/STOP ask the run to stop. The trainer finishes the current step, the ranks agree
// through the flag it all-reduces at every step boundary, every rank saves the same step, and the
// process exits with kExitStopped (util/exit_codes.h). A second signal kills at once.
#pragma once
#include <string>
#include <vector>

namespace xtrain::train {

void install_stop_signal_handlers(const std::vector<int>& signals);
bool stop_requested();
int stop_signal_number();

// true when <run_dir>/STOP exists; it is removed, so that the resumed run does not stop again.
bool take_stop_file(const std::string& run_dir);

}  // namespace xtrain::train

// A clean stop: the signals of train.stop_signals (TERM, INT, USR1 and HUP by default: Ctrl-C, a
// scheduler's preemption, SLURM's --signal warning before a time limit, a lost terminal or ssh
// session) or a file <run.dir>/STOP ask the run to stop. The trainer finishes the current step,
// the ranks agree through the flag it all-reduces at every step boundary, every rank saves the
// same step, and the process exits with kExitStopped (util/exit_codes.h). A second signal before
// that checkpoint is complete kills at once; after it, any stop signal exits kExitStopped at once
// (a scheduler that signals a rank still leaving, as srun does when another rank has exited,
// must still see a clean stop).
//
// STOP must be a regular file: it is removed when obeyed, so that the resumed run goes on.
// Anything else in its place (a directory, a fifo, a symbolic link) could not be removed the
// same way and would stop every rerun after one step, so it is an InputError naming it (exit 2).
#pragma once
#include <string>
#include <vector>

namespace xtrain::train {

void install_stop_signal_handlers(const std::vector<int>& signals);
bool stop_requested();
// The stop's checkpoint is complete on every rank: from now a stop signal exits kExitStopped.
void note_stop_checkpoint_saved();
bool stop_checkpoint_saved();
int stop_signal_number();

enum class StopFile { none, regular, not_a_file };

// What is at <run_dir>/STOP (lstat: a symbolic link is not_a_file); one stat per step.
StopFile inspect_stop_file(const std::string& run_dir);

// The error for a STOP that is not a regular file: names it, what it is, and the fix.
std::string not_a_stop_file_message(const std::string& run_dir);

// true when <run_dir>/STOP is a regular file; it is removed, so that the resumed run does not
// stop again. Throws InputError when something else is there.
bool take_stop_file(const std::string& run_dir);

// Before the first step: a STOP is left from before the run started (a stop already obeyed, or
// one touched while no run was going), so the chief removes it and says so rather than stop after
// one step. Every rank refuses a STOP that is not a regular file (InputError).
void clear_stop_file_at_start(const std::string& run_dir, bool chief);

// This rank's vote in the step boundary's all-reduce: 0 go on, 1 stop, kRefusedStopFileVote or
// more (summed over ranks) stop after the save and then fail with not_a_stop_file_message.
constexpr double kRefusedStopFileVote = 1000.0;
double stop_vote(StopFile file);

}  // namespace xtrain::train

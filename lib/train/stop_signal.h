// SIGINT/SIGTERM (Ctrl-C, SLURM preemption, a launcher's shutdown) request a clean stop: the
// trainer finishes the current step, writes a checkpoint and exits. A second signal kills.
#pragma once

namespace xtrain::train {

void install_stop_signal_handlers();
bool stop_requested();
int stop_signal_number();

}  // namespace xtrain::train

#include "train/stop_signal.h"

#include <csignal>

namespace xtrain::train {

namespace {
volatile std::sig_atomic_t g_signal = 0;

void on_signal(int signal_number) {
  if (g_signal != 0) {
    std::signal(signal_number, SIG_DFL);
    std::raise(signal_number);
    return;
  }
  g_signal = signal_number;
}
}  // namespace

void install_stop_signal_handlers() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}

bool stop_requested() { return g_signal != 0; }
int stop_signal_number() { return g_signal; }

}  // namespace xtrain::train

#include "train/stop_signal.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>

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

void install_stop_signal_handlers(const std::vector<int>& signals) {
  for (int signal_number : signals) {
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;  // a read or write in flight goes on; the step loop checks the flag
    ::sigaction(signal_number, &action, nullptr);
  }
}

bool stop_requested() { return g_signal != 0; }
int stop_signal_number() { return g_signal; }

bool take_stop_file(const std::string& run_dir) {
  const std::string path = run_dir + "/STOP";
  if (::access(path.c_str(), F_OK) != 0) return false;  // one stat per step
  std::remove(path.c_str());
  return true;
}

}  // namespace xtrain::train

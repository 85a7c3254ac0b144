// Signals as events the launcher polls along with its ranks' output: while a SignalPipe
// lives, SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGCHLD write their number to a non-blocking
// pipe instead of acting, and SIGPIPE is ignored (a closed terminal must not kill the launcher
// and, with it, the job). One instance at a time; the old dispositions return on destruction.
#pragma once
#include <array>
#include <csignal>
#include <vector>

namespace xtrain::launch {

class SignalPipe {
 public:
  SignalPipe();
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  // Readable when a signal arrived.
  int fd() const { return read_fd_; }
  // The signals that arrived since the last call, in order.
  std::vector<int> take();

  // The signals this class catches; a child process must set them back to SIG_DFL. A constant
  // array, so that a forked child can read it without running any initialisation.
  // USR1 and USR2 are what SLURM's --signal sends ahead of a time limit; they go to the ranks too.
  static constexpr std::array<int, 8> kCaughtSignals = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD, SIGPIPE};

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
  std::vector<struct sigaction> previous_;
};

}  // namespace xtrain::launch

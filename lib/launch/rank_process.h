// One rank: a child process running the command with its own environment.
// - It leads its own process group: a terminal's Ctrl-C reaches only the launcher, which
//   forwards it once (the trainer treats a second signal as "kill now"), and a signal sent to
//   the group also reaches processes the rank started itself.
// - stdin is /dev/null; stdout and stderr come back through pipes and are copied, line by
//   line with a "[rank R]: " prefix, to the launcher's stdout and stderr, and raw to a log file.
// - It receives SIGKILL if the launcher dies, so no rank outlives its launcher.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

#include "launch/line_prefixer.h"

namespace xtrain::launch {

struct RankCommand {
  int rank = 0;
  int local_rank = 0;
  std::string program;                   // absolute path
  std::vector<std::string> arguments;    // after the program name
  std::vector<std::string> environment;  // NAME=VALUE
  std::string log_path;                  // empty: no log file
};

class RankProcess {
 public:
  // Starts the process; std::runtime_error when the system refuses (pipes, fork, log file).
  explicit RankProcess(const RankCommand& command);
  // A process still running then is killed (with its group) and reaped.
  ~RankProcess();
  RankProcess(const RankProcess&) = delete;
  RankProcess& operator=(const RankProcess&) = delete;

  int rank() const { return rank_; }
  int local_rank() const { return local_rank_; }
  pid_t pid() const { return pid_; }
  bool running() const { return running_; }
  // The waitpid status; meaningful once running() is false.
  int wait_status() const { return wait_status_; }

  // The output pipes still open, to poll() for input.
  std::vector<int> output_fds() const;
  // Copies what is readable on one of output_fds() to its destinations.
  void pump(int fd);
  // True when the process has just ended: it is reaped, and its output drained and flushed.
  bool reap();
  // Sends the signal to the rank's process group (to the rank alone once that is gone).
  void signal_group(int signal);

 private:
  struct Stream {
    int fd = -1;
    int destination = -1;  // the launcher's stdout or stderr
    LinePrefixer prefixer;
  };
  // Reads until the pipe is empty (drain) or just once; closes it at end of file.
  void read_stream(Stream& stream, bool drain);
  void close_stream(Stream& stream);

  int rank_ = 0;
  int local_rank_ = 0;
  pid_t pid_ = -1;
  bool running_ = false;
  int wait_status_ = 0;
  int log_fd_ = -1;
  Stream out_{-1, 1, LinePrefixer("")};
  Stream err_{-1, 2, LinePrefixer("")};
};

}  // namespace xtrain::launch

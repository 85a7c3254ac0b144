#include "launch/rank_process.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "launch/signal_pipe.h"

namespace xtrain::launch {
namespace {

void write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a closed terminal or pipe: the output is lost, the job goes on
    data += n;
    size -= static_cast<size_t>(n);
  }
}

void write_all(int fd, const std::string& text) { write_all(fd, text.data(), text.size()); }

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (auto& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// Runs in the forked child, so only async-signal-safe calls: the launcher may have threads
// (the multi-node store), and any lock they held is frozen in the child.
[[noreturn]] void become_rank(pid_t launcher, int null_fd, int out_fd, int err_fd, const char* program,
                              char* const* argv, char* const* envp, const char* exec_failure_message) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != launcher) ::_exit(127);  // the launcher died before prctl took effect
  for (int signal : SignalPipe::kCaughtSignals) {
    struct sigaction action {};
    action.sa_handler = SIG_DFL;
    ::sigaction(signal, &action, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (::dup2(null_fd, 0) < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) ::_exit(127);
    // Like torchrun (Python's close_fds), the rank inherits no other descriptor of the launcher.
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0)
#endif
    for (int fd = 3; fd < 4096; ++fd) ::close(fd);
  ::execve(program, argv, envp);
  write_all(2, exec_failure_message, std::strlen(exec_failure_message));
  ::_exit(127);
}

}  // namespace

RankProcess::RankProcess(const RankCommand& command)
    : rank_(command.rank),
      local_rank_(command.local_rank),
      out_{-1, 1, LinePrefixer(rank_prefix(command.rank))},
      err_{-1, 2, LinePrefixer(rank_prefix(command.rank))} {
  // Everything the child needs is prepared before fork.
  std::vector<std::string> argv_strings{command.program};
  argv_strings.insert(argv_strings.end(), command.arguments.begin(), command.arguments.end());
  std::vector<std::string> env_strings = command.environment;
  const auto argv = c_strings(argv_strings);
  const auto envp = c_strings(env_strings);
  const std::string exec_failure = fmt::format("launch: cannot execute {}\n", command.program);

  // Descriptors opened so far, closed again if the start fails (no destructor runs then).
  std::vector<int> opened;
  auto fail = [&](const std::string& what) {
    const std::string reason = std::strerror(errno);
    for (int fd : opened) ::close(fd);
    throw std::runtime_error(fmt::format("launch: cannot {} for rank {}: {}", what, rank_, reason));
  };
  if (!command.log_path.empty()) {
    // Never through a link planted in the log folder: it would truncate whatever it points to.
    log_fd_ = ::open(command.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (log_fd_ < 0) fail("create " + command.log_path);
    opened.push_back(log_fd_);
  }
  int out_pipe[2], err_pipe[2];
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) fail("open /dev/null");
  opened.push_back(null_fd);
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) fail("create a pipe");
  opened.insert(opened.end(), {out_pipe[0], out_pipe[1]});
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) fail("create a pipe");
  opened.insert(opened.end(), {err_pipe[0], err_pipe[1]});

  const pid_t launcher = ::getpid();
  // Until the child has reset the launcher's handlers it would run them, and a stop signal sent
  // to the new rank would reach the launcher's signal pipe as if the launcher had been signalled.
  // Blocked across fork, such a signal waits for the rank's own default handling.
  sigset_t all, previous;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &previous);
  pid_ = ::fork();
  if (pid_ == 0)
    become_rank(launcher, null_fd, out_pipe[1], err_pipe[1], command.program.c_str(), argv.data(), envp.data(),
                exec_failure.c_str());
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (pid_ < 0) fail("start a process");
  ::close(null_fd);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  out_.fd = out_pipe[0];
  err_.fd = err_pipe[0];
  // Also set here, so that a signal sent to the group right after fork cannot miss it.
  ::setpgid(pid_, pid_);
  ::fcntl(out_.fd, F_SETFL, O_NONBLOCK);
  ::fcntl(err_.fd, F_SETFL, O_NONBLOCK);
  running_ = true;
}

RankProcess::~RankProcess() {
  if (running_) {
    signal_group(SIGKILL);
    ::waitpid(pid_, &wait_status_, 0);
  }
  close_stream(out_);
  close_stream(err_);
  if (log_fd_ >= 0) ::close(log_fd_);
}

std::vector<int> RankProcess::output_fds() const {
  std::vector<int> fds;
  for (const Stream* stream : {&out_, &err_})
    if (stream->fd >= 0) fds.push_back(stream->fd);
  return fds;
}

void RankProcess::pump(int fd) {
  if (fd == out_.fd) read_stream(out_, false);
  if (fd == err_.fd) read_stream(err_, false);
}

void RankProcess::read_stream(Stream& stream, bool drain) {
  char buffer[1 << 16];
  while (stream.fd >= 0) {
    const ssize_t n = ::read(stream.fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {
      close_stream(stream);
      return;
    }
    if (log_fd_ >= 0) write_all(log_fd_, buffer, static_cast<size_t>(n));
    write_all(stream.destination, stream.prefixer.feed(std::string_view(buffer, static_cast<size_t>(n))));
    if (!drain) return;
  }
}

void RankProcess::close_stream(Stream& stream) {
  if (stream.fd < 0) return;
  write_all(stream.destination, stream.prefixer.flush());
  ::close(stream.fd);
  stream.fd = -1;
}

bool RankProcess::reap() {
  if (!running_) return false;
  pid_t result;
  do result = ::waitpid(pid_, &wait_status_, WNOHANG);
  while (result < 0 && errno == EINTR);
  if (result != pid_) return false;
  running_ = false;
  // What the rank wrote before it ended is all in the pipes now. Output of processes it left
  // behind after this point is not copied.
  read_stream(out_, true);
  read_stream(err_, true);
  close_stream(out_);
  close_stream(err_);
  return true;
}

void RankProcess::signal_group(int signal) {
  if (::kill(-pid_, signal) != 0 && running_) ::kill(pid_, signal);
}

}  // namespace xtrain::launch

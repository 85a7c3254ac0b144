#include "train/reward_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/input_error.h"

extern char** environ;

namespace xtrain::train {

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kContract =
    "it reads one {\"prompt\", \"completion\", \"answer\"} JSON line per completion on stdin and writes one number per "
    "line on stdout, in the same order (docs/post-training.md)";

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

[[noreturn]] void fail(const RewardCommand& command, const std::string& what, const std::string& fix) {
  throw InputError(fmt::format("grpo.reward.command '{}': {}: {}", command.command, what, fix));
}

std::string stdin_text(const std::vector<CommandInput>& inputs) {
  std::string text;
  for (const auto& input : inputs) {
    nlohmann::json line;
    line["prompt"] = nlohmann::json::parse(input.prompt_json);
    line["completion"] = input.completion;
    line["answer"] = input.has_answer ? nlohmann::json(input.answer) : nlohmann::json(nullptr);
    text += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    text += '\n';
  }
  return text;
}

// The child: a process group of its own (so that a timeout kills what it started too), stdin a
// socket (a write to a program that stopped reading fails with EPIPE instead of raising SIGPIPE
// in xtrain), the signals xtrain handles back at their defaults.
pid_t spawn(const RewardCommand& command, int in, int out, int err) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in, 0);
  posix_spawn_file_actions_adddup2(&actions, out, 1);
  posix_spawn_file_actions_adddup2(&actions, err, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigfillset(&defaults);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  const char* argv[] = {"sh", "-c", command.command.c_str(), nullptr};
  pid_t pid = -1;
  const int error = posix_spawn(&pid, "/bin/sh", &actions, &attr, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (error != 0) fail(command, fmt::format("cannot start /bin/sh: {}", std::strerror(error)), "check the system");
  return pid;
}

struct Streams {
  std::string out, err;
  bool timed_out = false;
};

// Feeds stdin and drains stdout and stderr until both close or the deadline passes.
Streams exchange(int in, int out, int err, const std::string& input, Clock::time_point deadline) {
  Streams streams;
  size_t written = 0;
  int in_fd = in;
  auto close_input = [&] {
    ::shutdown(in_fd, SHUT_WR);
    in_fd = -1;
  };
  if (input.empty()) close_input();
  bool out_open = true, err_open = true;
  char buffer[65536];
  while (out_open || err_open) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      streams.timed_out = true;
      return streams;
    }
    pollfd fds[3] = {{out_open ? out : -1, POLLIN, 0}, {err_open ? err : -1, POLLIN, 0}, {in_fd, POLLOUT, 0}};
    if (::poll(fds, 3, static_cast<int>(std::min<int64_t>(left, 1000))) < 0 && errno != EINTR) break;
    if (in_fd >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const auto sent = ::send(in_fd, input.data() + written, input.size() - written, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent > 0) written += static_cast<size_t>(sent);
      // A program that stops reading early may still answer: what it wrote decides.
      if (written == input.size() || (sent < 0 && errno != EAGAIN && errno != EINTR)) close_input();
    }
    auto drain = [&](const pollfd& fd, bool& open, std::string& into) {
      if (!open || !(fd.revents & (POLLIN | POLLHUP | POLLERR))) return;
      const auto got = ::read(fd.fd, buffer, sizeof buffer);
      if (got > 0)
        into.append(buffer, static_cast<size_t>(got));
      else if (got == 0 || (errno != EAGAIN && errno != EINTR))
        open = false;
    };
    drain(fds[0], out_open, streams.out);
    drain(fds[1], err_open, streams.err);
  }
  return streams;
}

// Waits for the program's exit without reaping it (its process group stays reserved), kills what
// is left of the group, then reaps. timed_out: it was still running at the deadline.
struct Exit {
  int status = 0;
  bool timed_out = false;
};

Exit finish(pid_t pid, Clock::time_point deadline, bool timed_out) {
  for (;;) {
    if (timed_out) break;
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) break;
    timed_out = Clock::now() >= deadline;
    if (!timed_out) ::usleep(2000);
  }
  ::kill(-pid, SIGKILL);
  Exit exit;
  exit.timed_out = timed_out;
  while (::waitpid(pid, &exit.status, 0) < 0 && errno == EINTR) {
  }
  return exit;
}

std::string stderr_tail(const std::string& err) {
  if (err.find_first_not_of(" \t\r\n") == std::string::npos) return "";
  auto tail = err.size() > 600 ? "..." + err.substr(err.size() - 600) : err;
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) tail.pop_back();
  return fmt::format(" (its stderr: {})", tail);
}

std::vector<double> parse_rewards(const RewardCommand& command, const std::string& out, size_t expected,
                                  const std::string& err) {
  std::vector<double> rewards;
  std::istringstream lines(out);
  std::string line;
  for (int64_t number = 1; std::getline(lines, line); ++number) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    const auto text = line.substr(first, line.find_last_not_of(" \t\r") + 1 - first);
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0' || !std::isfinite(value))
      fail(command, fmt::format("line {} of its output is '{}', not a finite number{}", number, text, stderr_tail(err)),
           fmt::format("fix the program: {}", kContract));
    rewards.push_back(value);
  }
  if (rewards.size() != expected)
    fail(command, fmt::format("it wrote {} rewards for {} completions{}", rewards.size(), expected, stderr_tail(err)),
         fmt::format("fix the program: {}", kContract));
  return rewards;
}

}  // namespace

std::vector<double> run_reward_command(const RewardCommand& command, const std::vector<CommandInput>& inputs) {
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(command.timeout_s));
  const auto input = stdin_text(inputs);
  int in_pair[2], out_pipe[2], err_pipe[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in_pair) != 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0 ||
      ::pipe2(err_pipe, O_CLOEXEC) != 0)
    fail(command, fmt::format("cannot make its pipes: {}", std::strerror(errno)), "check the open file limit");
  Fd in(in_pair[0]), child_in(in_pair[1]), out(out_pipe[0]), child_out(out_pipe[1]), err(err_pipe[0]),
      child_err(err_pipe[1]);
  const pid_t pid = spawn(command, child_in.get(), child_out.get(), child_err.get());
  child_in.reset();
  child_out.reset();
  child_err.reset();
  ::fcntl(out.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(err.get(), F_SETFL, O_NONBLOCK);
  Streams streams;
  try {
    streams = exchange(in.get(), out.get(), err.get(), input, deadline);
  } catch (...) {
    finish(pid, deadline, true);
    throw;
  }
  const auto exit = finish(pid, deadline, streams.timed_out);
  const int status = exit.status;
  if (exit.timed_out)
    fail(command,
         fmt::format("still running after grpo.reward.timeout_s {} s, so it and its process group were killed{}",
                     command.timeout_s, stderr_tail(streams.err)),
         "make the program finish sooner (it scores a whole rollout batch per call), or raise grpo.reward.timeout_s");
  if (WIFSIGNALED(status))
    fail(command, fmt::format("killed by signal {} ({}){}", WTERMSIG(status), strsignal(WTERMSIG(status)),
                              stderr_tail(streams.err)),
         fmt::format("fix the program: {}", kContract));
  if (WEXITSTATUS(status) != 0)
    fail(command, fmt::format("exited with status {}{}", WEXITSTATUS(status), stderr_tail(streams.err)),
         fmt::format("fix the program so that it exits 0: {}", kContract));
  return parse_rewards(command, streams.out, inputs.size(), streams.err);
}

}  // namespace xtrain::train

#include "launch/signal_pipe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

namespace xtrain::launch {
namespace {

volatile int g_write_fd = -1;

void on_signal(int signal) {
  const int saved_errno = errno;
  const unsigned char byte = static_cast<unsigned char>(signal);
  // A full pipe drops the byte: the loop still wakes for the ones already queued.
  [[maybe_unused]] const ssize_t written = ::write(g_write_fd, &byte, 1);
  errno = saved_errno;
}

}  // namespace

SignalPipe::SignalPipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("launch: cannot create a pipe for signals");
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  g_write_fd = write_fd_;
  for (int signal : kCaughtSignals) {
    struct sigaction action {};
    action.sa_handler = signal == SIGPIPE ? SIG_IGN : on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART | (signal == SIGCHLD ? SA_NOCLDSTOP : 0);
    struct sigaction old {};
    ::sigaction(signal, &action, &old);
    previous_.push_back(old);
  }
}

SignalPipe::~SignalPipe() {
  for (size_t i = 0; i < previous_.size(); ++i) ::sigaction(kCaughtSignals[i], &previous_[i], nullptr);
  g_write_fd = -1;
  ::close(read_fd_);
  ::close(write_fd_);
}

std::vector<int> SignalPipe::take() {
  std::vector<int> signals;
  unsigned char buffer[64];
  ssize_t n;
  while ((n = ::read(read_fd_, buffer, sizeof(buffer))) > 0)
    for (ssize_t i = 0; i < n; ++i) signals.push_back(buffer[i]);
  return signals;
}

}  // namespace xtrain::launch

#include "util/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/input_error.h"
#include "util/posix_file.h"

namespace xtrain::util {
namespace {

int open_lock_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0)
    throw InputError(path + ": cannot open the lock file: " + std::strerror(errno) +
                     " (the folder must be writable by every process that shares it)");
  return fd;
}

// flock returns EINTR when a signal arrives while it waits; the wait goes on.
int flock_retrying(int fd, int operation) {
  int result;
  do {
    result = ::flock(fd, operation);
  } while (result != 0 && errno == EINTR);
  return result;
}

}  // namespace

FileLock FileLock::acquire(const std::string& path) {
  const int fd = open_lock_file(path);
  if (flock_retrying(fd, LOCK_EX) != 0) {
    const int error = errno;
    ::close(fd);
    errno = error;
    throw_errno("lock", path);
  }
  return FileLock(fd, path);
}

std::optional<FileLock> FileLock::try_acquire(const std::string& path) {
  const int fd = open_lock_file(path);
  if (flock_retrying(fd, LOCK_EX | LOCK_NB) == 0) return FileLock(fd, path);
  const int error = errno;
  ::close(fd);
  if (error == EWOULDBLOCK) return std::nullopt;
  errno = error;
  throw_errno("lock", path);
}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

// Closing the descriptor releases the lock.
FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace xtrain::util

// FileLock: an exclusive advisory lock (flock) on a file, held while the object lives, so that
// processes sharing a folder (the ranks of a node, or runs started together) take turns at
// something one of them must do alone. The lock file is created when missing and left in place:
// removing it while another process waits on it would let a third lock a new file of the same
// name. The kernel drops the lock when its holder dies, so a killed process never leaves it held.
#pragma once
#include <optional>
#include <string>

namespace xtrain::util {

class FileLock {
 public:
  // Waits until the lock is free. A lock file that cannot be created or opened is an InputError
  // naming it.
  static FileLock acquire(const std::string& path);
  // nullopt when another process holds it.
  static std::optional<FileLock> try_acquire(const std::string& path);

  FileLock(FileLock&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) { other.fd_ = -1; }
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

  const std::string& path() const { return path_; }

 private:
  FileLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

  int fd_ = -1;
  std::string path_;
};

}  // namespace xtrain::util

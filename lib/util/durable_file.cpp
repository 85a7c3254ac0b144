#include "util/durable_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "util/input_error.h"

namespace xtrain::util {
namespace {

std::string errno_message(int error) { return std::generic_category().message(error); }

// Failures here are the environment's (disk full, permissions, I/O errors), not the user's
// input, so they are runtime errors rather than InputError.
[[noreturn]] void throw_errno(const std::string& action, const std::string& path) {
  const int error = errno;
  throw std::runtime_error("cannot " + action + " " + path + ": " + errno_message(error));
}

// Closes on scope exit; an explicit close() reports errors, which matter after writes
// (NFS and some filesystems report deferred write failures only at close).
class Fd {
 public:
  Fd(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  void close() {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw_errno("close", path_);
  }

 private:
  int fd_;
  std::string path_;
};

std::string parent_directory(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

void write_all(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    const ssize_t written = ::write(fd, data, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      throw_errno("write", path);
    }
    data += written;
    size -= static_cast<size_t>(written);
  }
}

}  // namespace

void write_file_durable(const std::string& path, const std::string& contents) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), path);
  if (fd.get() < 0) throw_errno("create", path);
  write_all(fd.get(), contents.data(), contents.size(), path);
  if (::fsync(fd.get()) != 0) throw_errno("fsync", path);
  fd.close();
}

void replace_file_atomic(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp";
  try {
    write_file_durable(tmp, contents);
    if (::rename(tmp.c_str(), path.c_str()) != 0) throw_errno("rename " + tmp + " to", path);
  } catch (...) {
    ::unlink(tmp.c_str());  // best effort: a stale .tmp is harmless but untidy
    throw;
  }
  fsync_path(parent_directory(path));
}

void fsync_path(const std::string& path) {
  // O_RDONLY is enough: fsync needs no write access, and directories cannot be opened for writing.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC), path);
  if (fd.get() < 0) throw_errno("open", path);
  if (::fsync(fd.get()) != 0) throw_errno("fsync", path);
  fd.close();
}

void replace_symlink_atomic(const std::string& target, const std::string& link_path) {
  // symlink() refuses to overwrite, so build the new link beside the old one and rename it
  // over: rename replaces atomically, and readers never see the link missing.
  const std::string tmp = link_path + ".tmp";
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) throw_errno("remove", tmp);
  if (::symlink(target.c_str(), tmp.c_str()) != 0) throw_errno("create symlink", tmp);
  if (::rename(tmp.c_str(), link_path.c_str()) != 0) {
    const int error = errno;
    ::unlink(tmp.c_str());
    errno = error;
    throw_errno("rename " + tmp + " to", link_path);
  }
  fsync_path(parent_directory(link_path));
}

std::string read_file(const std::string& path) {
  const auto fail = [&path]() -> InputError {
    return InputError("cannot read " + path + ": " + errno_message(errno));
  };
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC), path);
  if (fd.get() < 0) throw fail();
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) throw fail();

  std::string contents;
  // The size is only a hint: files in /proc report 0, and a file may grow while we read.
  if (S_ISREG(info.st_mode)) contents.reserve(static_cast<size_t>(info.st_size));
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw fail();
    }
    if (n == 0) break;
    contents.append(buffer, static_cast<size_t>(n));
  }
  return contents;
}

}  // namespace xtrain::util

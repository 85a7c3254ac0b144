#include "util/posix_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>

#include "util/input_error.h"

namespace xtrain::util {
namespace {

std::string errno_message(int error) { return std::generic_category().message(error); }

}  // namespace

void throw_errno(const std::string& action, const std::string& path) {
  const int error = errno;
  throw std::runtime_error("cannot " + action + " " + path + ": " + errno_message(error));
}

OutputFile OutputFile::create(const std::string& path, FileMode mode) {
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (mode == FileMode::replace ? O_TRUNC : O_EXCL);
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd >= 0) return OutputFile(fd, path);
  const int error = errno;
  struct stat info {};
  // ELOOP (O_NOFOLLOW), or EEXIST (O_EXCL, which never follows a link either): name the link.
  if ((error == ELOOP || error == EEXIST) && ::lstat(path.c_str(), &info) == 0 && S_ISLNK(info.st_mode))
    throw InputError("cannot write " + path +
                     ": it is a symbolic link, and xtrain does not write through links; remove the link, or "
                     "give the path of a real file or folder");
  errno = error;
  throw_errno("create", path);
}

OutputFile OutputFile::open_for_sync(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno("open", path);
  return OutputFile(fd, path);
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void OutputFile::write(const void* data, size_t size) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = ::write(fd_, bytes, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      throw_errno("write", path_);
    }
    bytes += written;
    size -= static_cast<size_t>(written);
  }
}

void OutputFile::sync() {
  if (::fsync(fd_) != 0) throw_errno("fsync", path_);
}

void OutputFile::close() {
  const int fd = fd_;
  fd_ = -1;  // even a failed close frees the descriptor, and retrying could close another
  if (::close(fd) != 0) throw_errno("close", path_);
}

InputFile::InputFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail();
  struct stat info {};
  if (::fstat(fd_, &info) != 0) {
    // The destructor does not run for a constructor that throws.
    const int error = errno;
    ::close(fd_);
    errno = error;
    fail();
  }
  regular_ = S_ISREG(info.st_mode);
  size_ = static_cast<uint64_t>(info.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

size_t InputFile::read(void* data, size_t size) {
  while (true) {
    const ssize_t n = ::read(fd_, data, size);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR) fail();
  }
}

size_t InputFile::read_at(void* data, size_t size, uint64_t offset) {
  char* bytes = static_cast<char*>(data);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd_, bytes + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail();
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

void InputFile::fail() const {
  const int error = errno;
  throw InputError("cannot read " + path_ + ": " + errno_message(error));
}

}  // namespace xtrain::util

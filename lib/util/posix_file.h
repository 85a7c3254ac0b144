// Files through raw POSIX descriptors, for what iostreams cannot do: fsync, and a close whose
// failure is reported (NFS and some filesystems report deferred write failures only at close).
//
// Writing fails because of the environment (disk full, permissions, I/O errors), not the
// user's input, so OutputFile throws std::runtime_error. Reading fails on a file the user
// named, so InputFile throws InputError. Messages read "cannot <action> <path>: <reason>".
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace xtrain::util {

// Throws std::runtime_error "cannot <action> <path>: <strerror(errno)>", for system calls that
// have no wrapper here (rename, symlink, ...).
[[noreturn]] void throw_errno(const std::string& action, const std::string& path);

// How OutputFile::create treats a file already at the path. Neither mode writes through a
// symbolic link (O_NOFOLLOW): a link in the file's place is an InputError naming it, so that a
// link planted where xtrain writes (to /etc/passwd, say) never redirects the write.
enum class FileMode {
  replace,     // truncated and rewritten (O_TRUNC)
  create_new,  // refused (O_EXCL): for folders xtrain has just made, where nothing may be yet
};

// Closed on scope exit, where errors are ignored: call close() after writing to hear of them.
class OutputFile {
 public:
  // Created with mode 0644 (before the umask), as FileMode says for an existing file.
  static OutputFile create(const std::string& path, FileMode mode = FileMode::replace);
  // An existing file or directory, opened read-only just to be synced: fsync needs no write
  // access, and directories cannot be opened for writing.
  static OutputFile open_for_sync(const std::string& path);

  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();

  // Writes all of the bytes, resuming after interrupts and short writes.
  void write(const void* data, size_t size);
  void sync();
  void close();
  // Hands the descriptor over (to fdopen, say): the caller closes it.
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  OutputFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

  int fd_;
  std::string path_;
};

// Opened and measured up front, so that size() is known before the first read.
class InputFile {
 public:
  explicit InputFile(const std::string& path);
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  // False for /proc files, pipes and devices, whose size() is meaningless.
  bool is_regular() const { return regular_; }
  uint64_t size() const { return size_; }
  // Reads up to size bytes from the current position; 0 only at the end of the file.
  size_t read(void* data, size_t size);
  // Reads size bytes at offset without moving the position; fewer only at the end of the file.
  size_t read_at(void* data, size_t size, uint64_t offset);

 private:
  [[noreturn]] void fail() const;

  int fd_ = -1;
  std::string path_;
  bool regular_ = false;
  uint64_t size_ = 0;
};

}  // namespace xtrain::util

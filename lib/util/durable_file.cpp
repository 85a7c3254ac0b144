#include "util/durable_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "util/posix_file.h"

namespace xtrain::util {
namespace {

std::string parent_directory(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

}  // namespace

void write_file_durable(const std::string& path, const std::string& contents, FileMode mode) {
  OutputFile file = OutputFile::create(path, mode);
  file.write(contents.data(), contents.size());
  file.sync();
  file.close();
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
  OutputFile file = OutputFile::open_for_sync(path);
  file.sync();
  file.close();
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
  InputFile file(path);
  std::string contents;
  // The size is only a hint: files in /proc report 0, and a file may grow while we read.
  if (file.is_regular()) contents.reserve(static_cast<size_t>(file.size()));
  char buffer[1 << 16];
  while (const size_t n = file.read(buffer, sizeof(buffer))) contents.append(buffer, n);
  return contents;
}

}  // namespace xtrain::util

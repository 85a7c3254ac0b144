// Durable file operations for checkpoints: data is on disk (fsynced) before a rename makes
// it visible, so a kill -9 or a power cut leaves either the old state or the new one.
#pragma once
#include <string>

#include "util/posix_file.h"

namespace xtrain::util {

// Writes contents to path and fsyncs it; an existing file is replaced or refused as mode says
// (never written through a symbolic link: posix_file.h).
void write_file_durable(const std::string& path, const std::string& contents, FileMode mode = FileMode::replace);
// Writes to path + ".tmp" (a link there is refused), fsyncs, renames over path and fsyncs the parent directory.
void replace_file_atomic(const std::string& path, const std::string& contents);
// fsync of a file or directory (a directory fsync makes renames inside it durable).
void fsync_path(const std::string& path);
// Points the symlink link_path at target atomically (a temp link renamed over it).
void replace_symlink_atomic(const std::string& target, const std::string& link_path);
// Reads a whole file; InputError naming the path when it cannot be read.
std::string read_file(const std::string& path);

}  // namespace xtrain::util

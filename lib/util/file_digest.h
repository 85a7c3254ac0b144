// XXH3-64 digests as 16 lowercase hex digits: of bytes in memory, and of a whole file read in
// 1 MiB blocks. XXH3 reads memory at several GB/s, so digesting a data file costs little next to
// reading it from disk. A file that cannot be read is an InputError naming it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace xtrain::util {

std::string xxh3_hex(const void* data, size_t size);
inline std::string xxh3_hex(const std::string& bytes) { return xxh3_hex(bytes.data(), bytes.size()); }
// bytes, when given, receives the file's size as read.
std::string file_xxh3(const std::string& path, uint64_t* bytes = nullptr);

}  // namespace xtrain::util

// MappedFile: a whole file mapped read-only into memory (mmap), for data files read in
// place (Megatron .bin/.idx). Reading a file the user named can fail on bad input, so a
// missing or unreadable file is an InputError naming it. An empty file maps to no memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace xtrain::util {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void unmap();

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace xtrain::util

// Safetensors IO (the Hugging Face format) of torch tensors: the header (safetensors_header.h),
// then raw little-endian tensor bytes. Supported dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL
// F8_E4M3 F8_E5M2.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "ckpt/safetensors_header.h"
#include "util/posix_file.h"

namespace xtrain::ckpt {

using TensorMap = std::map<std::string, torch::Tensor>;

struct SafetensorsFile {
  TensorMap tensors;
  Metadata metadata;
};

// Writes CPU copies of the tensors (contiguous) and fsyncs the file before returning. An
// existing file is replaced or refused as mode says, never written through a link
// (util/posix_file.h).
void save_safetensors(const std::string& path, const TensorMap& tensors,
                      const Metadata& metadata = {}, util::FileMode mode = util::FileMode::replace);

// Reads the whole file. A missing, truncated or malformed file is an InputError that names
// the path and what is wrong with it.
SafetensorsFile load_safetensors(const std::string& path);

// One file, open, with its validated header: any slice of any tensor is read on its own, so that
// a rank that keeps a piece of a parameter reads that piece and nothing else.
class SafetensorsReader {
 public:
  explicit SafetensorsReader(std::string path);
  ~SafetensorsReader();

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsEntry>& entries() const { return header_.entries; }
  const Metadata& metadata() const { return header_.metadata; }
  const SafetensorsEntry* find(const std::string& name) const;  // null when absent
  // Elements [begin, begin + count) of the tensor's row-major flattening, 1-D, in its dtype.
  torch::Tensor read(const SafetensorsEntry& entry, int64_t begin, int64_t count) const;

 private:
  std::string path_;
  std::unique_ptr<util::InputFile> file_;
  SafetensorsHeader header_;
};

}  // namespace xtrain::ckpt

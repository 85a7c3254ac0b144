// Safetensors IO (the Hugging Face format): 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}, then raw
// little-endian tensor bytes. Supported dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <torch/types.h>

namespace xtrain::ckpt {

using TensorMap = std::map<std::string, torch::Tensor>;
using Metadata = std::map<std::string, std::string>;

struct SafetensorsFile {
  TensorMap tensors;
  Metadata metadata;
};

// Writes CPU copies of the tensors (contiguous) and fsyncs the file before returning.
void save_safetensors(const std::string& path, const TensorMap& tensors,
                      const Metadata& metadata = {});

// Reads the whole file. A missing, truncated or malformed file is an InputError that names
// the path and what is wrong with it.
SafetensorsFile load_safetensors(const std::string& path);

// Where each tensor's bytes lie in a file (offsets from the file's start), from the header
// alone; the header is validated as load_safetensors does.
struct TensorSpan {
  std::string name;
  uint64_t begin = 0, end = 0;
};
struct SafetensorsLayout {
  uint64_t data_start = 0;  // the 8-byte length and the JSON header come before
  std::vector<TensorSpan> tensors;
};
SafetensorsLayout read_safetensors_layout(const std::string& path);

}  // namespace xtrain::ckpt

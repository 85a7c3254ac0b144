// Safetensors IO (the Hugging Face format) of torch tensors: the header (safetensors_header.h),
// then raw little-endian tensor bytes. Supported dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <torch/types.h>

#include "ckpt/safetensors_header.h"

namespace xtrain::ckpt {

using TensorMap = std::map<std::string, torch::Tensor>;

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

}  // namespace xtrain::ckpt

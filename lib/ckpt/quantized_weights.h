// Quantized Hugging Face folders read as the float tensors they stand for, dequantized as
// transformers dequantizes them (its quantization_config `dequantize: true`, and its CPU path):
//
// - fp8 (DeepSeek-V3/R1, Qwen3-FP8): a weight X of shape [..., R, C] stored as F8_E4M3 beside
//   X_scale_inv ("X.weight_scale_inv"), one scale per block of weight_block_size [bm, bn] (the
//   last blocks of a row or column may be short), F32/BF16/F16, or U8 as an e8m0 exponent
//   (2^(byte - 127)). Each value is float32(q) * float32(scale).
// - mxfp4 (gpt-oss's experts): X_blocks U8 [E, R, G, 16] (two FP4 e2m1 values a byte, the low
//   nibble first) and X_scales U8 [E, R, G] (e8m0, one per 32 values): ldexp(value, byte - 127)
//   in float32, laid out [E, R, 32 G] and transposed to the parameter's [E, 32 G, R].
//
// Everything else is read as stored. A scale that is missing or mis-shaped, an unknown
// quant_method and a format xtrain does not dequantize are InputErrors naming the file, the
// tensor and what is wrong; so is an integer or FP8 tensor where the model reads floats.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>
#include <torch/types.h>

#include "ckpt/safetensors.h"

namespace xtrain::ckpt {

// A folder's quantization, from config.json's quantization_config.
struct Quantization {
  enum class Method { none, fp8, mxfp4 };
  Method method = Method::none;
  // fp8's weight_block_size (transformers' default [128, 128]); 0 when null: one scale a matrix.
  std::array<int64_t, 2> block{128, 128};
  std::string source;  // "DIR/config.json", for messages
};
// InputError for a quantization_config xtrain does not dequantize (another quant_method, an FP8
// format other than e4m3, FP4 experts under fp8), naming `source` and the key.
Quantization folder_quantization(const nlohmann::json& config, const std::string& source);

// One tensor of a folder's safetensors files, with the open reader of its file.
struct FolderTensor {
  std::shared_ptr<SafetensorsReader> reader;
  const SafetensorsEntry* entry = nullptr;
};
using FolderTensors = std::map<std::string, FolderTensor>;

// A tensor as the model reads it: its shape, the file and dtype it is stored in, and elements
// [begin, begin + count) of its row-major flattening as a 1-D float32 tensor.
struct WeightTensor {
  std::vector<int64_t> shape;
  std::string path;
  SafetensorsDtype dtype = SafetensorsDtype::F32;
  bool dequantized = false;
  std::function<torch::Tensor(int64_t begin, int64_t count)> read;
};
using WeightTensors = std::map<std::string, WeightTensor>;

// The folder's tensors, each quantized weight and its scales as the one tensor they stand for.
WeightTensors weight_tensors(const FolderTensors& tensors, const Quantization& quantization);

// InputError unless `tensor`, read for the model's floating-point parameter or buffer `name`,
// holds floating-point values (stored so, or dequantized).
void check_floating(const std::string& name, const WeightTensor& tensor, const Quantization& quantization);

}  // namespace xtrain::ckpt

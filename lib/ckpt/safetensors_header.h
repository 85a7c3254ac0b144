// The torch-free half of safetensors IO: the dtypes a header may name, and the validated parse
// of a file's header (8-byte little-endian length, then the JSON {name: {dtype, shape,
// data_offsets}, "__metadata__": {str: str}}). The tensor reader and writer (safetensors.h)
// and the checkpoint manifest build on it; it needs no LibTorch, so it can be fuzzed alone.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace xtrain::util {
class InputFile;
}

namespace xtrain::ckpt {

using Metadata = std::map<std::string, std::string>;

constexpr const char* kSafetensorsMetadataKey = "__metadata__";
constexpr uint64_t kSafetensorsLengthBytes = 8;  // the little-endian header length

// F8_E4M3 and F8_E5M2 are the FP8 formats (torch's float8_e4m3fn and float8_e5m2) of quantized
// folders (ckpt/quantized_weights.h).
enum class SafetensorsDtype : uint8_t { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL, F8_E4M3, F8_E5M2 };

const char* safetensors_dtype_name(SafetensorsDtype dtype);  // "BF16"
size_t safetensors_dtype_size(SafetensorsDtype dtype);       // bytes per element
std::optional<SafetensorsDtype> safetensors_dtype_from_name(const std::string& name);

// One tensor of the header. begin and end are offsets from the start of the data section.
struct SafetensorsEntry {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

struct SafetensorsHeader {
  Metadata metadata;
  std::vector<SafetensorsEntry> entries;  // in name order
  uint64_t data_start = 0;                // file offset of the data section
};

// Reads and validates the header of an open file: each entry's shape matches its byte span,
// and every span lies inside the file. Problems are InputErrors prefixed with path.
SafetensorsHeader read_safetensors_header(util::InputFile& file, const std::string& path);

// Reads exactly size bytes at offset, which the header has shown to lie inside the file; an
// InputError if the file shrank meanwhile.
void read_safetensors_bytes(util::InputFile& file, void* data, size_t size, uint64_t offset,
                            const std::string& path);

// Where each tensor's bytes lie in a file (offsets from the file's start), from the header.
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

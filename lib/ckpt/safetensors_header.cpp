#include "ckpt/safetensors_header.h"

#include <algorithm>
#include <array>
#include <limits>

#include <nlohmann/json.hpp>

#include "util/input_error.h"
#include "util/posix_file.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors IO needs a little-endian host");

namespace xtrain::ckpt {
namespace {

struct DtypeInfo {
  SafetensorsDtype dtype;
  const char* name;
  size_t size;
};

constexpr std::array<DtypeInfo, 12> kDtypes{{
    {SafetensorsDtype::F64, "F64", 8},
    {SafetensorsDtype::F32, "F32", 4},
    {SafetensorsDtype::F16, "F16", 2},
    {SafetensorsDtype::BF16, "BF16", 2},
    {SafetensorsDtype::I64, "I64", 8},
    {SafetensorsDtype::I32, "I32", 4},
    {SafetensorsDtype::I16, "I16", 2},
    {SafetensorsDtype::I8, "I8", 1},
    {SafetensorsDtype::U8, "U8", 1},
    {SafetensorsDtype::BOOL, "BOOL", 1},
    {SafetensorsDtype::F8_E4M3, "F8_E4M3", 1},
    {SafetensorsDtype::F8_E5M2, "F8_E5M2", 1},
}};

// kDtypes is indexed by the enum.
static_assert(kDtypes[static_cast<size_t>(SafetensorsDtype::BF16)].dtype == SafetensorsDtype::BF16 &&
              kDtypes.back().dtype == SafetensorsDtype::F8_E5M2);
const DtypeInfo& info(SafetensorsDtype dtype) { return kDtypes[static_cast<size_t>(dtype)]; }

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

// The byte size of a tensor, or nullopt when it does not fit in 64 bits: a hostile shape such
// as [2^40, 2^40] must be an error, not a wrapped-around match with the data offsets.
std::optional<uint64_t> byte_size(SafetensorsDtype dtype, const std::vector<int64_t>& shape) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  uint64_t bytes = safetensors_dtype_size(dtype);
  for (const int64_t dim : shape) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes)) return std::nullopt;
  }
  return bytes;
}

class HeaderParser {
 public:
  explicit HeaderParser(const std::string& path) : path_(path) {}

  [[noreturn]] void fail(const std::string& problem) const {
    throw InputError(path_ + ": " + problem);
  }

  Metadata parse_metadata(const nlohmann::json& value) const {
    if (!value.is_object()) fail(std::string(kSafetensorsMetadataKey) + " must be an object of strings");
    Metadata metadata;
    for (const auto& [key, item] : value.items()) {
      if (!item.is_string()) {
        fail(std::string(kSafetensorsMetadataKey) + " value for '" + key + "' must be a string, got " +
             item.dump());
      }
      metadata[key] = item.get<std::string>();
    }
    return metadata;
  }

  SafetensorsEntry parse_entry(const std::string& name, const nlohmann::json& value) const {
    const std::string where = "tensor '" + name + "'";
    if (!value.is_object()) {
      fail(where + ": entry must be an object, got " + std::string(value.type_name()));
    }
    const auto field = [&](const char* key) -> const nlohmann::json& {
      const auto it = value.find(key);
      if (it == value.end()) fail(where + ": missing \"" + key + "\"");
      return *it;
    };

    const nlohmann::json& dtype_json = field("dtype");
    if (!dtype_json.is_string()) fail(where + ": dtype must be a string, got " + dtype_json.dump());
    const std::string dtype = dtype_json.get<std::string>();
    const std::optional<SafetensorsDtype> type = safetensors_dtype_from_name(dtype);
    if (!type) {
      fail(where + ": unsupported dtype \"" + dtype +
           "\" (supported: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL F8_E4M3 F8_E5M2)");
    }

    SafetensorsEntry entry{name, *type, {}, 0, 0};
    const nlohmann::json& shape = field("shape");
    if (!shape.is_array()) fail(where + ": shape must be an array, got " + shape.dump());
    for (const auto& dim : shape) {
      if (!dim.is_number_unsigned() ||
          dim.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail(where + ": shape must hold non-negative integers, got " + shape.dump());
      }
      entry.shape.push_back(dim.get<int64_t>());
    }

    const nlohmann::json& offsets = field("data_offsets");
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned() ||
        offsets[0].get<uint64_t>() > offsets[1].get<uint64_t>()) {
      fail(where + ": data_offsets must be [begin, end] with 0 <= begin <= end, got " +
           offsets.dump());
    }
    entry.begin = offsets[0].get<uint64_t>();
    entry.end = offsets[1].get<uint64_t>();

    const uint64_t span = entry.end - entry.begin;
    const std::optional<uint64_t> bytes = byte_size(entry.dtype, entry.shape);
    if (bytes != span) {
      fail(where + ": shape " + shape_string(entry.shape) + " of " + dtype + " does not match " +
           "data_offsets " + offsets.dump() + " (" + std::to_string(span) + " bytes)");
    }
    return entry;
  }

 private:
  const std::string& path_;
};

}  // namespace

void read_safetensors_bytes(util::InputFile& file, void* data, size_t size, uint64_t offset,
                const std::string& path) {
  // The file shrank after we measured it: someone else is writing it.
  if (file.read_at(data, size, offset) != size) {
    throw InputError(path + ": truncated while reading (is it being written?)");
  }
}

const char* safetensors_dtype_name(SafetensorsDtype dtype) { return info(dtype).name; }
size_t safetensors_dtype_size(SafetensorsDtype dtype) { return info(dtype).size; }

std::optional<SafetensorsDtype> safetensors_dtype_from_name(const std::string& name) {
  for (const auto& entry : kDtypes) {
    if (name == entry.name) return entry.dtype;
  }
  return std::nullopt;
}

SafetensorsHeader read_safetensors_header(util::InputFile& input, const std::string& path) {
  if (!input.is_regular()) throw InputError(path + ": not a regular file");
  const uint64_t file_size = input.size();
  const HeaderParser parser(path);

  if (file_size < kSafetensorsLengthBytes) {
    parser.fail("truncated: " + std::to_string(file_size) +
                " bytes, too short for the 8-byte header length");
  }
  uint64_t header_length = 0;
  read_safetensors_bytes(input, &header_length, sizeof(header_length), 0, path);
  const uint64_t after_prefix = file_size - kSafetensorsLengthBytes;
  if (header_length > after_prefix) {
    parser.fail("truncated or not a safetensors file: header length says " +
                std::to_string(header_length) + " bytes, file has " +
                std::to_string(after_prefix) + " after the 8-byte length");
  }

  std::string header_text(header_length, '\0');
  read_safetensors_bytes(input, header_text.data(), header_text.size(), kSafetensorsLengthBytes, path);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_text);
  } catch (const nlohmann::json::exception& e) {
    parser.fail(std::string("invalid JSON header: ") + e.what());
  }
  if (!header.is_object()) {
    parser.fail(std::string("the JSON header must be an object, got ") + header.type_name());
  }

  SafetensorsHeader parsed;
  uint64_t data_needed = 0;
  for (const auto& [name, value] : header.items()) {
    if (name == kSafetensorsMetadataKey) {
      parsed.metadata = parser.parse_metadata(value);
      continue;
    }
    parsed.entries.push_back(parser.parse_entry(name, value));
    data_needed = std::max(data_needed, parsed.entries.back().end);
  }
  parsed.data_start = kSafetensorsLengthBytes + header_length;
  const uint64_t data_size = file_size - parsed.data_start;
  if (data_needed > data_size) {
    parser.fail("truncated: header says " + std::to_string(data_needed) +
                " bytes of tensor data, file has " + std::to_string(data_size));
  }
  return parsed;
}

SafetensorsLayout read_safetensors_layout(const std::string& path) {
  util::InputFile input(path);
  const SafetensorsHeader parsed = read_safetensors_header(input, path);
  SafetensorsLayout layout;
  layout.data_start = parsed.data_start;
  for (const SafetensorsEntry& entry : parsed.entries)
    layout.tensors.push_back({entry.name, parsed.data_start + entry.begin, parsed.data_start + entry.end});
  return layout;
}

}  // namespace xtrain::ckpt

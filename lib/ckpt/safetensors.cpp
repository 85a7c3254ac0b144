#include "ckpt/safetensors.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/input_error.h"
#include "util/posix_file.h"

// Tensor bytes are copied to and from the file as they lie in memory, and the format is
// little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors IO needs a little-endian host");

namespace xtrain::ckpt {
namespace {

constexpr const char* kMetadataKey = "__metadata__";
constexpr uint64_t kLengthPrefixBytes = 8;

struct DtypeName {
  const char* name;
  torch::ScalarType type;
};

constexpr std::array<DtypeName, 10> kDtypes{{
    {"F64", torch::kDouble},
    {"F32", torch::kFloat},
    {"F16", torch::kHalf},
    {"BF16", torch::kBFloat16},
    {"I64", torch::kLong},
    {"I32", torch::kInt},
    {"I16", torch::kShort},
    {"I8", torch::kChar},
    {"U8", torch::kByte},
    {"BOOL", torch::kBool},
}};

std::optional<torch::ScalarType> dtype_from_name(const std::string& name) {
  for (const auto& entry : kDtypes) {
    if (name == entry.name) return entry.type;
  }
  return std::nullopt;
}

const char* dtype_name(torch::ScalarType type) {
  for (const auto& entry : kDtypes) {
    if (type == entry.type) return entry.name;
  }
  return nullptr;
}

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
std::optional<uint64_t> byte_size(torch::ScalarType type, const std::vector<int64_t>& shape) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  uint64_t bytes = c10::elementSize(type);
  for (const int64_t dim : shape) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes)) return std::nullopt;
  }
  return bytes;
}

// One tensor's entry in the header, validated against the header alone.
struct Entry {
  std::string name;
  torch::ScalarType type;
  std::vector<int64_t> shape;
  uint64_t begin;
  uint64_t end;
};

class HeaderParser {
 public:
  explicit HeaderParser(const std::string& path) : path_(path) {}

  [[noreturn]] void fail(const std::string& problem) const {
    throw InputError(path_ + ": " + problem);
  }

  Metadata parse_metadata(const nlohmann::json& value) const {
    if (!value.is_object()) fail(std::string(kMetadataKey) + " must be an object of strings");
    Metadata metadata;
    for (const auto& [key, item] : value.items()) {
      if (!item.is_string()) {
        fail(std::string(kMetadataKey) + " value for '" + key + "' must be a string, got " +
             item.dump());
      }
      metadata[key] = item.get<std::string>();
    }
    return metadata;
  }

  Entry parse_entry(const std::string& name, const nlohmann::json& value) const {
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
    const std::optional<torch::ScalarType> type = dtype_from_name(dtype);
    if (!type) {
      fail(where + ": unsupported dtype \"" + dtype +
           "\" (supported: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)");
    }

    Entry entry{name, *type, {}, 0, 0};
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
    const std::optional<uint64_t> bytes = byte_size(entry.type, entry.shape);
    if (bytes != span) {
      fail(where + ": shape " + shape_string(entry.shape) + " of " + dtype + " does not match " +
           "data_offsets " + offsets.dump() + " (" + std::to_string(span) + " bytes)");
    }
    return entry;
  }

 private:
  const std::string& path_;
};

// Reads exactly size bytes at offset; the caller has checked that they lie inside the file.
void read_exact(util::InputFile& file, void* data, size_t size, uint64_t offset,
                const std::string& path) {
  // The file shrank after we measured it: someone else is writing it.
  if (file.read_at(data, size, offset) != size) {
    throw InputError(path + ": truncated while reading (is it being written?)");
  }
}

}  // namespace

void save_safetensors(const std::string& path, const TensorMap& tensors,
                      const Metadata& metadata) {
  // ordered_json keeps the key order of the Hugging Face writer: __metadata__ first, then the
  // tensors in name order, each as dtype, shape, data_offsets.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    const std::string where = "save_safetensors: tensor '" + name + "'";
    if (name == kMetadataKey) throw std::invalid_argument(where + ": the name is reserved");
    if (!tensor.defined()) throw std::invalid_argument(where + " is undefined");
    const char* dtype = dtype_name(tensor.scalar_type());
    if (dtype == nullptr) {
      throw std::invalid_argument(where + " has unsupported dtype " +
                                  c10::toString(tensor.scalar_type()));
    }
    const uint64_t nbytes = tensor.numel() * tensor.element_size();
    header[name] = {{"dtype", dtype},
                    {"shape", tensor.sizes().vec()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }

  std::string prefix_and_header(kLengthPrefixBytes, '\0');
  prefix_and_header += header.dump();
  // Pad with spaces (valid JSON whitespace) so the tensor data starts 8-byte aligned, which
  // lets readers memory-map the file and use the data in place.
  prefix_and_header.append((8 - prefix_and_header.size() % 8) % 8, ' ');
  const uint64_t header_length = prefix_and_header.size() - kLengthPrefixBytes;
  std::memcpy(prefix_and_header.data(), &header_length, sizeof(header_length));

  util::OutputFile file = util::OutputFile::create(path);
  file.write(prefix_and_header.data(), prefix_and_header.size());
  for (const auto& [name, tensor] : tensors) {
    // One CPU copy at a time: a model on an accelerator is never copied to host memory whole.
    const torch::Tensor cpu = tensor.detach().to(torch::kCPU).contiguous();
    file.write(cpu.data_ptr(), cpu.nbytes());
  }
  file.sync();
  file.close();
}

namespace {

struct ParsedHeader {
  Metadata metadata;
  std::vector<Entry> entries;
  uint64_t data_start = 0;
};

// Reads and validates the header; every tensor's bytes are known to lie inside the file.
ParsedHeader read_header(util::InputFile& input, const std::string& path) {
  if (!input.is_regular()) throw InputError(path + ": not a regular file");
  const uint64_t file_size = input.size();
  const HeaderParser parser(path);

  if (file_size < kLengthPrefixBytes) {
    parser.fail("truncated: " + std::to_string(file_size) +
                " bytes, too short for the 8-byte header length");
  }
  uint64_t header_length = 0;
  read_exact(input, &header_length, sizeof(header_length), 0, path);
  const uint64_t after_prefix = file_size - kLengthPrefixBytes;
  if (header_length > after_prefix) {
    parser.fail("truncated or not a safetensors file: header length says " +
                std::to_string(header_length) + " bytes, file has " +
                std::to_string(after_prefix) + " after the 8-byte length");
  }

  std::string header_text(header_length, '\0');
  read_exact(input, header_text.data(), header_text.size(), kLengthPrefixBytes, path);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_text);
  } catch (const nlohmann::json::parse_error& e) {
    parser.fail(std::string("invalid JSON header: ") + e.what());
  }
  if (!header.is_object()) {
    parser.fail(std::string("the JSON header must be an object, got ") + header.type_name());
  }

  ParsedHeader parsed;
  uint64_t data_needed = 0;
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      parsed.metadata = parser.parse_metadata(value);
      continue;
    }
    parsed.entries.push_back(parser.parse_entry(name, value));
    data_needed = std::max(data_needed, parsed.entries.back().end);
  }
  parsed.data_start = kLengthPrefixBytes + header_length;
  const uint64_t data_size = file_size - parsed.data_start;
  if (data_needed > data_size) {
    parser.fail("truncated: header says " + std::to_string(data_needed) +
                " bytes of tensor data, file has " + std::to_string(data_size));
  }
  return parsed;
}

}  // namespace

SafetensorsLayout read_safetensors_layout(const std::string& path) {
  util::InputFile input(path);
  const ParsedHeader parsed = read_header(input, path);
  SafetensorsLayout layout;
  layout.data_start = parsed.data_start;
  for (const Entry& entry : parsed.entries)
    layout.tensors.push_back({entry.name, parsed.data_start + entry.begin, parsed.data_start + entry.end});
  return layout;
}

SafetensorsFile load_safetensors(const std::string& path) {
  util::InputFile input(path);
  ParsedHeader parsed = read_header(input, path);
  const HeaderParser parser(path);
  const uint64_t data_start = parsed.data_start;
  SafetensorsFile file;
  file.metadata = std::move(parsed.metadata);
  const std::vector<Entry>& entries = parsed.entries;

  // Reading straight into fresh tensors leaves them owning their memory, with no second copy
  // of the file in RAM.
  for (const Entry& entry : entries) {
    torch::Tensor tensor = torch::empty(entry.shape, torch::TensorOptions().dtype(entry.type));
    read_exact(input, tensor.data_ptr(), tensor.nbytes(), data_start + entry.begin, path);
    if (entry.type == torch::kBool) {
      // Any byte other than 0 or 1 is not a valid bool, and torch's kernels assume it is.
      const auto* bytes = static_cast<const uint8_t*>(tensor.data_ptr());
      if (std::any_of(bytes, bytes + tensor.nbytes(), [](uint8_t b) { return b > 1; })) {
        parser.fail("tensor '" + entry.name + "': BOOL data holds bytes other than 0 and 1");
      }
    }
    file.tensors.emplace(entry.name, std::move(tensor));
  }
  return file;
}

}  // namespace xtrain::ckpt

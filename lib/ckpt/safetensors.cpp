#include "ckpt/safetensors.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "util/input_error.h"
#include "util/posix_file.h"

namespace xtrain::ckpt {
namespace {

struct DtypeType {
  SafetensorsDtype dtype;
  torch::ScalarType type;
};

constexpr std::array<DtypeType, 12> kTypes{{
    {SafetensorsDtype::F64, torch::kDouble},
    {SafetensorsDtype::F32, torch::kFloat},
    {SafetensorsDtype::F16, torch::kHalf},
    {SafetensorsDtype::BF16, torch::kBFloat16},
    {SafetensorsDtype::I64, torch::kLong},
    {SafetensorsDtype::I32, torch::kInt},
    {SafetensorsDtype::I16, torch::kShort},
    {SafetensorsDtype::I8, torch::kChar},
    {SafetensorsDtype::U8, torch::kByte},
    {SafetensorsDtype::BOOL, torch::kBool},
    {SafetensorsDtype::F8_E4M3, torch::kFloat8_e4m3fn},
    {SafetensorsDtype::F8_E5M2, torch::kFloat8_e5m2},
}};

torch::ScalarType scalar_type(SafetensorsDtype dtype) {
  for (const auto& entry : kTypes) {
    if (dtype == entry.dtype) return entry.type;
  }
  throw std::logic_error("safetensors dtype without a torch type");
}

const char* dtype_name(torch::ScalarType type) {
  for (const auto& entry : kTypes) {
    if (type == entry.type) return safetensors_dtype_name(entry.dtype);
  }
  return nullptr;
}

}  // namespace

void save_safetensors(const std::string& path, const TensorMap& tensors,
                      const Metadata& metadata, util::FileMode mode) {
  // ordered_json keeps the key order of the Hugging Face writer: __metadata__ first, then the
  // tensors in name order, each as dtype, shape, data_offsets.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kSafetensorsMetadataKey] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    const std::string where = "save_safetensors: tensor '" + name + "'";
    if (name == kSafetensorsMetadataKey) throw std::invalid_argument(where + ": the name is reserved");
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

  std::string prefix_and_header(kSafetensorsLengthBytes, '\0');
  prefix_and_header += header.dump();
  // Pad with spaces (valid JSON whitespace) so the tensor data starts 8-byte aligned, which
  // lets readers memory-map the file and use the data in place.
  prefix_and_header.append((8 - prefix_and_header.size() % 8) % 8, ' ');
  const uint64_t header_length = prefix_and_header.size() - kSafetensorsLengthBytes;
  std::memcpy(prefix_and_header.data(), &header_length, sizeof(header_length));

  util::OutputFile file = util::OutputFile::create(path, mode);
  file.write(prefix_and_header.data(), prefix_and_header.size());
  for (const auto& [name, tensor] : tensors) {
    // One CPU copy at a time: a model on an accelerator is never copied to host memory whole.
    const torch::Tensor cpu = tensor.detach().to(torch::kCPU).contiguous();
    file.write(cpu.data_ptr(), cpu.nbytes());
  }
  file.sync();
  file.close();
}

SafetensorsReader::SafetensorsReader(std::string path)
    : path_(std::move(path)), file_(std::make_unique<util::InputFile>(path_)),
      header_(read_safetensors_header(*file_, path_)) {}

SafetensorsReader::~SafetensorsReader() = default;

const SafetensorsEntry* SafetensorsReader::find(const std::string& name) const {
  // Entries are in name order.
  auto it = std::lower_bound(header_.entries.begin(), header_.entries.end(), name,
                             [](const SafetensorsEntry& entry, const std::string& key) { return entry.name < key; });
  return it != header_.entries.end() && it->name == name ? &*it : nullptr;
}

torch::Tensor SafetensorsReader::read(const SafetensorsEntry& entry, int64_t begin, int64_t count) const {
  const size_t element = safetensors_dtype_size(entry.dtype);
  const auto type = scalar_type(entry.dtype);
  TORCH_CHECK(type != torch::kBool, path_, ": tensor '", entry.name, "' is BOOL; read it with load_safetensors");
  TORCH_CHECK(begin >= 0 && count >= 0 && (begin + count) * element <= entry.end - entry.begin, path_,
              ": slice [", begin, ", ", begin + count, ") outside tensor '", entry.name, "'");
  auto values = torch::empty({count}, torch::TensorOptions().dtype(type));
  read_safetensors_bytes(*file_, values.data_ptr(), values.nbytes(), header_.data_start + entry.begin + begin * element,
                         path_);
  return values;
}

SafetensorsFile load_safetensors(const std::string& path) {
  util::InputFile input(path);
  SafetensorsHeader parsed = read_safetensors_header(input, path);
  const uint64_t data_start = parsed.data_start;
  SafetensorsFile file;
  file.metadata = std::move(parsed.metadata);
  const std::vector<SafetensorsEntry>& entries = parsed.entries;

  // Reading straight into fresh tensors leaves them owning their memory, with no second copy
  // of the file in RAM.
  for (const SafetensorsEntry& entry : entries) {
    const torch::ScalarType type = scalar_type(entry.dtype);
    torch::Tensor tensor = torch::empty(entry.shape, torch::TensorOptions().dtype(type));
    read_safetensors_bytes(input, tensor.data_ptr(), tensor.nbytes(), data_start + entry.begin,
                           path);
    if (type == torch::kBool) {
      // Any byte other than 0 or 1 is not a valid bool, and torch's kernels assume it is.
      const auto* bytes = static_cast<const uint8_t*>(tensor.data_ptr());
      if (std::any_of(bytes, bytes + tensor.nbytes(), [](uint8_t b) { return b > 1; })) {
        throw InputError(path + ": tensor '" + entry.name + "': BOOL data holds bytes other than 0 and 1");
      }
    }
    file.tensors.emplace(entry.name, std::move(tensor));
  }
  return file;
}

}  // namespace xtrain::ckpt

#include "ckpt/finite_check.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ckpt/safetensors_header.h"
#include "util/mapped_file.h"
#include "util/input_error.h"
#include "util/posix_file.h"

namespace fs = std::filesystem;

namespace xtrain::ckpt {
namespace {

std::optional<torch::ScalarType> floating_type(SafetensorsDtype dtype) {
  switch (dtype) {
    case SafetensorsDtype::F64: return torch::kFloat64;
    case SafetensorsDtype::F32: return torch::kFloat32;
    case SafetensorsDtype::F16: return torch::kFloat16;
    case SafetensorsDtype::BF16: return torch::kBFloat16;
    default: return std::nullopt;
  }
}

void check_file(const std::string& dir, const std::string& file, std::vector<std::string>& problems) {
  const std::string path = dir + "/" + file;
  SafetensorsHeader header;
  {
    util::InputFile input(path);
    header = read_safetensors_header(input, path);
  }
  const util::MappedFile mapped(path);
  torch::NoGradGuard no_grad;
  for (const auto& entry : header.entries) {
    const auto type = floating_type(entry.dtype);
    const uint64_t bytes = entry.end - entry.begin;
    if (!type || bytes == 0) continue;
    if (header.data_start + entry.end > mapped.size())
      throw InputError(fmt::format("{}: shorter than its header says (it changed while being read)", path));
    // Read in place: the mapping is read-only and these reductions only read.
    auto* data = const_cast<uint8_t*>(mapped.data() + header.data_start + entry.begin);
    const auto values = torch::from_blob(data, {static_cast<int64_t>(bytes / safetensors_dtype_size(entry.dtype))},
                                         torch::TensorOptions().dtype(*type));
    // max and min propagate NaN, and an infinity is its own max or min: no temporary as large
    // as the tensor unless it is bad.
    const auto extremes = torch::stack({values.amax(), values.amin()}).to(torch::kFloat32);
    if (torch::isfinite(extremes).all().item<bool>()) continue;
    problems.push_back(fmt::format("{}: tensor '{}' has {} NaN and {} infinite values of {}", file, entry.name,
                                   torch::isnan(values).sum().item<int64_t>(),
                                   torch::isinf(values).sum().item<int64_t>(), values.numel()));
  }
}

}  // namespace

std::vector<std::string> non_finite_tensors(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().extension() == ".safetensors")
      files.push_back(entry.path().filename().string());
  std::sort(files.begin(), files.end());
  std::vector<std::string> problems;
  for (const auto& file : files) check_file(dir, file, problems);
  return problems;
}

}  // namespace xtrain::ckpt

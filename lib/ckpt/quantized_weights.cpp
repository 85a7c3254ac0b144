#include "ckpt/quantized_weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "util/input_error.h"

namespace xtrain::ckpt {
namespace {

constexpr const char* kMethods = "xtrain dequantizes \"fp8\" (block-scaled F8_E4M3, as DeepSeek-V3 and Qwen3-FP8) and "
                                 "\"mxfp4\" (gpt-oss's experts)";

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string dtype_name(const SafetensorsEntry& entry) { return safetensors_dtype_name(entry.dtype); }

bool is_floating(SafetensorsDtype dtype) {
  return dtype == SafetensorsDtype::F64 || dtype == SafetensorsDtype::F32 || dtype == SafetensorsDtype::F16 ||
         dtype == SafetensorsDtype::BF16;
}
bool is_fp8(SafetensorsDtype dtype) {
  return dtype == SafetensorsDtype::F8_E4M3 || dtype == SafetensorsDtype::F8_E5M2;
}

std::array<int64_t, 2> block_size(const nlohmann::json& config, const std::string& source) {
  const auto it = config.find("weight_block_size");
  if (it == config.end()) return {128, 128};  // transformers' FineGrainedFP8Config default
  if (it->is_null()) return {0, 0};
  if (!it->is_array() || it->size() != 2 || !(*it)[0].is_number_unsigned() || !(*it)[1].is_number_unsigned() ||
      (*it)[0].get<int64_t>() < 1 || (*it)[1].get<int64_t>() < 1)
    throw InputError(fmt::format("{}: quantization_config.weight_block_size is {}; it must be two positive integers, "
                                 "e.g. [128, 128]",
                                 source, it->dump()));
  return {(*it)[0].get<int64_t>(), (*it)[1].get<int64_t>()};
}

// fp8's keys that name a format: what transformers reads, or DeepSeek's "fmt".
void check_fp8_format(const nlohmann::json& config, const std::string& source) {
  const auto is = [&](const char* key, const char* value) {
    const auto it = config.find(key);
    return it == config.end() || it->is_null() || (it->is_string() && it->get<std::string>() == value);
  };
  if (!is("fmt", "e4m3"))
    throw InputError(fmt::format("{}: quantization_config.fmt is {}: xtrain dequantizes FP8 weights of format "
                                 "\"e4m3\" (F8_E4M3) only",
                                 source, config.at("fmt").dump()));
  if (!is("expert_dtype", "fp8"))
    throw InputError(fmt::format("{}: quantization_config.expert_dtype is {}: xtrain dequantizes FP8 experts "
                                 "(\"fp8\") only, not FP4-packed ones",
                                 source, config.at("expert_dtype").dump()));
}

// The scales of an fp8 weight as float32, as transformers widens them: U8 bytes are e8m0
// exponents.
torch::Tensor fp8_scales(const FolderTensor& scale) {
  const auto& entry = *scale.entry;
  int64_t count = 1;
  for (const auto dim : entry.shape) count *= dim;
  auto values = scale.reader->read(entry, 0, count);
  if (entry.dtype == SafetensorsDtype::U8) return (values.to(torch::kFloat32) - 127.0).exp2();
  return values.to(torch::kFloat32);
}

WeightTensor fp8_weight(const std::string& name, const FolderTensor& weight, const std::string& scale_name,
                        const FolderTensor& scale, const Quantization& quantization) {
  const auto& shape = weight.entry->shape;
  const std::string& path = weight.reader->path();
  if (weight.entry->dtype != SafetensorsDtype::F8_E4M3)
    throw InputError(fmt::format("{}: tensor '{}' is {}; {} (quant_method fp8) stores F8_E4M3 weights, the one FP8 "
                                 "format xtrain dequantizes",
                                 path, name, dtype_name(*weight.entry), quantization.source));
  if (shape.size() < 2)
    throw InputError(fmt::format("{}: tensor '{}' of shape [{}] is F8_E4M3: fp8 block scales quantize matrices only",
                                 path, name, fmt::join(shape, ", ")));
  const int64_t rows = shape[shape.size() - 2], cols = shape.back();
  const int64_t block_rows = quantization.block[0] > 0 ? quantization.block[0] : std::max<int64_t>(rows, 1);
  const int64_t block_cols = quantization.block[1] > 0 ? quantization.block[1] : std::max<int64_t>(cols, 1);
  std::vector<int64_t> grid(shape.begin(), shape.end() - 2);
  grid.push_back(ceil_div(rows, block_rows));
  grid.push_back(ceil_div(cols, block_cols));
  const bool one_scale = quantization.block[0] == 0 && scale.entry->shape.empty() && shape.size() == 2;
  if (scale.entry->shape != grid && !one_scale)
    throw InputError(fmt::format(
        "{}: tensor '{}' has shape [{}]; the block scales of '{}' ([{}] in {}) in blocks of {}x{} "
        "(quantization_config.weight_block_size) have shape [{}]",
        scale.reader->path(), scale_name, fmt::join(scale.entry->shape, ", "), name, fmt::join(shape, ", "), path,
        block_rows, block_cols, fmt::join(grid, ", ")));
  const auto scale_type = scale.entry->dtype;
  if (!is_floating(scale_type) && scale_type != SafetensorsDtype::U8)
    throw InputError(fmt::format("{}: tensor '{}' is {}; fp8 block scales are F32, BF16, F16 or U8 (e8m0 exponents)",
                                 scale.reader->path(), scale_name, dtype_name(*scale.entry)));
  WeightTensor tensor{shape, path, weight.entry->dtype, true, {}};
  const int64_t grid_rows = grid[grid.size() - 2], grid_cols = grid.back();
  tensor.read = [weight, scale, rows, cols, block_rows, block_cols, grid_rows, grid_cols](int64_t begin,
                                                                                          int64_t count) {
    if (count == 0) return torch::empty({0}, torch::kFloat32);
    // The whole rows (of the matrices stacked) that hold the slice, each times its blocks' scales.
    const int64_t first = begin / cols, last = ceil_div(begin + count, cols);
    const auto values =
        weight.reader->read(*weight.entry, first * cols, (last - first) * cols).to(torch::kFloat32).view({-1, cols});
    const auto row = torch::arange(first, last, torch::kLong);
    const auto scale_row = torch::div(row, rows, "floor") * grid_rows + torch::div(torch::remainder(row, rows),
                                                                                   block_rows, "floor");
    const auto scales = fp8_scales(scale)
                            .view({-1, grid_cols})
                            .index_select(0, scale_row)
                            .repeat_interleave(block_cols, 1)
                            .narrow(1, 0, cols);
    return (values * scales).view({-1}).narrow(0, begin - first * cols, count);
  };
  return tensor;
}

// gpt-oss's FP4 values (e2m1) by nibble, as transformers' FP4_VALUES.
const std::array<float, 16> kFp4Values = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                                          -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

WeightTensor mxfp4_weight(const std::string& blocks_name, const FolderTensor& blocks,
                          const std::string& scales_name, const FolderTensor& scales) {
  const auto& shape = blocks.entry->shape;
  const std::string& path = blocks.reader->path();
  if (blocks.entry->dtype != SafetensorsDtype::U8 || shape.size() != 4 || shape[3] != 16)
    throw InputError(fmt::format("{}: tensor '{}' is {} [{}]; mxfp4 blocks are U8 [experts, rows, blocks, 16] (32 FP4 "
                                 "values in 16 bytes)",
                                 path, blocks_name, dtype_name(*blocks.entry), fmt::join(shape, ", ")));
  const std::vector<int64_t> grid(shape.begin(), shape.end() - 1);
  if (scales.entry->dtype != SafetensorsDtype::U8 || scales.entry->shape != grid)
    throw InputError(fmt::format("{}: tensor '{}' is {} [{}]; the scales of '{}' (U8 [{}] in {}) are U8 [{}], one e8m0 "
                                 "exponent per 32 values",
                                 scales.reader->path(), scales_name, dtype_name(*scales.entry),
                                 fmt::join(scales.entry->shape, ", "), blocks_name, fmt::join(shape, ", "), path,
                                 fmt::join(grid, ", ")));
  const int64_t experts = shape[0], rows = shape[1], groups = shape[2], bytes = shape[3];
  const int64_t width = groups * bytes * 2;  // values per row
  WeightTensor tensor{{experts, width, rows}, path, blocks.entry->dtype, true, {}};
  tensor.read = [=](int64_t begin, int64_t count) {
    const int64_t per_expert = width * rows;
    const auto lut = torch::tensor(std::vector<float>(kFp4Values.begin(), kFp4Values.end()), torch::kFloat32);
    std::vector<torch::Tensor> pieces;
    for (int64_t expert = begin / per_expert; expert * per_expert < begin + count; ++expert) {
      const auto packed = blocks.reader->read(*blocks.entry, expert * rows * groups * bytes, rows * groups * bytes)
                              .view({rows * groups, bytes});
      const auto exponents = scales.reader->read(*scales.entry, expert * rows * groups, rows * groups);
      if ((exponents == 255).any().item<bool>())
        throw InputError(fmt::format("{}: tensor '{}' holds 255, e8m0's NaN, in expert {}", scales.reader->path(),
                                     scales_name, expert));
      auto values = torch::empty({rows * groups, bytes * 2}, torch::kFloat32);
      values.slice(1, 0, bytes * 2, 2).copy_(lut.index({torch::bitwise_and(packed, 0x0F).to(torch::kInt)}));
      values.slice(1, 1, bytes * 2, 2).copy_(lut.index({torch::bitwise_right_shift(packed, 4).to(torch::kInt)}));
      values = torch::ldexp(values, (exponents.to(torch::kInt32) - 127).view({-1, 1}));
      const auto matrix = values.view({rows, width}).t().contiguous().view({-1});
      const int64_t from = std::max(begin, expert * per_expert), to = std::min(begin + count, (expert + 1) * per_expert);
      pieces.push_back(matrix.narrow(0, from - expert * per_expert, to - from));
    }
    return pieces.size() == 1 ? pieces.front() : pieces.empty() ? torch::empty({0}) : torch::cat(pieces);
  };
  return tensor;
}

WeightTensor stored(const FolderTensor& tensor) {
  return {tensor.entry->shape, tensor.reader->path(), tensor.entry->dtype, false,
          [tensor](int64_t begin, int64_t count) {
            return tensor.reader->read(*tensor.entry, begin, count).to(torch::kFloat32);
          }};
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// fp8: each F8 tensor X with X_scale_inv; activation scales (static activation quantization)
// are the forward's business, dropped as transformers' dequantization drops them.
WeightTensors fp8_tensors(const FolderTensors& tensors, const Quantization& quantization) {
  WeightTensors result;
  for (const auto& [name, tensor] : tensors) {
    if (ends_with(name, "_scale_inv") || ends_with(name, ".activation_scale")) continue;
    if (!is_fp8(tensor.entry->dtype)) {
      if (tensors.count(name + "_scale_inv"))
        throw InputError(fmt::format("{}: tensor '{}' is {}, yet '{}_scale_inv' scales it as an F8_E4M3 weight "
                                     "({}: quant_method fp8)",
                                     tensor.reader->path(), name, dtype_name(*tensor.entry), name, quantization.source));
      result[name] = stored(tensor);
      continue;
    }
    const auto scale = tensors.find(name + "_scale_inv");
    if (scale == tensors.end())
      throw InputError(fmt::format("{}: tensor '{}' is {} but the folder has no '{}_scale_inv', its block scales "
                                   "({}: quant_method fp8); is a file of the folder missing?",
                                   tensor.reader->path(), name, dtype_name(*tensor.entry), name, quantization.source));
    result[name] = fp8_weight(name, tensor, scale->first, scale->second, quantization);
  }
  // A scale without its weight is left to the caller's check of unexpected tensors.
  for (const auto& [name, tensor] : tensors)
    if (ends_with(name, "_scale_inv") && !tensors.count(name.substr(0, name.size() - 10))) result[name] = stored(tensor);
  return result;
}

// mxfp4: each X_blocks with X_scales, read as X.
WeightTensors mxfp4_tensors(const FolderTensors& tensors, const Quantization& quantization) {
  WeightTensors result;
  for (const auto& [name, tensor] : tensors) {
    if (ends_with(name, "_scales") && tensors.count(name.substr(0, name.size() - 7) + "_blocks")) continue;
    if (!ends_with(name, "_blocks")) {
      result[name] = stored(tensor);
      continue;
    }
    const std::string base = name.substr(0, name.size() - 7);
    const auto scales = tensors.find(base + "_scales");
    if (scales == tensors.end())
      throw InputError(fmt::format("{}: tensor '{}' has no '{}_scales' beside it, its e8m0 scales ({}: quant_method "
                                   "mxfp4); is a file of the folder missing?",
                                   tensor.reader->path(), name, base, quantization.source));
    result[base] = mxfp4_weight(name, tensor, scales->first, scales->second);
  }
  return result;
}

}  // namespace

Quantization folder_quantization(const nlohmann::json& config, const std::string& source) {
  Quantization quantization;
  quantization.source = source;
  const auto it = config.is_object() ? config.find("quantization_config") : config.end();
  if (!config.is_object() || it == config.end() || it->is_null()) return quantization;
  if (!it->is_object())
    throw InputError(fmt::format("{}: quantization_config is {}; it must be an object with a quant_method", source,
                                 it->dump()));
  const auto method = it->find("quant_method");
  const std::string name = method != it->end() && method->is_string() ? method->get<std::string>() : "";
  if (name == "fp8") {
    quantization.method = Quantization::Method::fp8;
    quantization.block = block_size(*it, source);
    check_fp8_format(*it, source);
  } else if (name == "mxfp4") {
    quantization.method = Quantization::Method::mxfp4;
  } else {
    throw InputError(fmt::format("{}: quantization_config.quant_method is {}: {}; convert the folder to float "
                                 "weights first (e.g. with transformers and save_pretrained)",
                                 source, method == it->end() ? std::string("missing") : method->dump(), kMethods));
  }
  return quantization;
}

WeightTensors weight_tensors(const FolderTensors& tensors, const Quantization& quantization) {
  switch (quantization.method) {
    case Quantization::Method::fp8: return fp8_tensors(tensors, quantization);
    case Quantization::Method::mxfp4: return mxfp4_tensors(tensors, quantization);
    case Quantization::Method::none: break;
  }
  WeightTensors result;
  for (const auto& [name, tensor] : tensors) result[name] = stored(tensor);
  return result;
}

void check_floating(const std::string& name, const WeightTensor& tensor, const Quantization& quantization) {
  if (tensor.dequantized || is_floating(tensor.dtype)) return;
  const char* dtype = safetensors_dtype_name(tensor.dtype);
  if (is_fp8(tensor.dtype))
    throw InputError(fmt::format("{}: tensor '{}' is {} without scales: {} names no fp8 quantization_config; an FP8 "
                                 "folder has quantization_config.quant_method \"fp8\" and a '{}_scale_inv' beside "
                                 "each FP8 weight",
                                 tensor.path, name, dtype,
                                 quantization.source.empty() ? std::string("config.json") : quantization.source, name));
  throw InputError(fmt::format("{}: tensor '{}' is {}, but the model's parameter it holds is floating point: write it "
                               "as F32, BF16 or F16 (integer tensors are read only as the blocks and scales of the "
                               "quantization that config.json's quantization_config names)",
                               tensor.path, name, dtype));
}

}  // namespace xtrain::ckpt

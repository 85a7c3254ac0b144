#include "ckpt/folder_weights.h"

#include <filesystem>
#include <map>
#include <functional>
#include <memory>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "ckpt/checkpoint_reader.h"
#include "model/spec/hf_config.h"
#include "ckpt/quantized_weights.h"
#include "ckpt/safetensors.h"
#include "ckpt/sharded_checkpoint.h"
#include "model/spec/model_spec.h"
#include "util/durable_file.h"
#include "util/input_error.h"

namespace xtrain::ckpt {
namespace {

// The tensors a folder must hold for the model, by their names there: a Hugging Face folder's
// (hf_stored_tensors: experts may be stored apart), or a training checkpoint's (the model's
// names, whole tensors). Each with the parameter it belongs to and its shape.
struct Expected {
  std::string parameter;
  std::vector<int64_t> shape;
};
std::map<std::string, Expected> expected_tensors(const model::CausalLM& model, bool hf) {
  const auto& spec = model::model_spec(model.config().family);
  std::map<std::string, Expected> expected;
  for (const auto& item : model.named_parameters()) {
    const auto shape = item.value().sizes().vec();
    if (!hf) {
      expected[item.key()] = {item.key(), shape};
      continue;
    }
    for (const auto& [name, part_shape] : model::hf_stored_tensors(spec, item.key(), shape))
      expected[name] = {item.key(), part_shape};
  }
  return expected;
}

// Every name in `found` (name -> shape, file) is expected with that shape, and none is missing.
void check_tensors(const std::map<std::string, std::pair<std::vector<int64_t>, std::string>>& found,
                   const std::map<std::string, Expected>& expected, const std::string& source) {
  for (const auto& [name, want] : expected) {
    auto it = found.find(name);
    if (it == found.end()) throw InputError(fmt::format("{}: missing tensor '{}'", source, name));
    if (it->second.first != want.shape)
      throw InputError(fmt::format("{}: tensor '{}' has shape [{}], the model expects [{}]", it->second.second, name,
                                   fmt::join(it->second.first, ", "), fmt::join(want.shape, ", ")));
  }
  for (const auto& [name, where] : found)
    if (expected.count(name) == 0)
      throw InputError(
          fmt::format("{}: unexpected tensor '{}' (does config.json match the weights?)", where.second, name));
}

using LocatedTensors = FolderTensors;

LocatedTensors file_tensors(const std::string& path) {
  LocatedTensors tensors;
  auto reader = std::make_shared<SafetensorsReader>(path);
  for (const auto& entry : reader->entries()) tensors[entry.name] = {reader, &entry};
  return tensors;
}

// The tensors of an index's weight_map, each in the file the index names.
LocatedTensors indexed_tensors(const std::string& dir, const std::string& index_path) {
  std::map<std::string, std::shared_ptr<SafetensorsReader>> readers;
  LocatedTensors tensors;
  for (const auto& [name, file_name] : read_weight_map(index_path)) {
    auto& reader = readers[file_name];
    if (!reader) reader = std::make_shared<SafetensorsReader>(dir + "/" + file_name);
    const auto* entry = reader->find(name);
    if (!entry)
      throw InputError(fmt::format("{}: tensor '{}' is not in {}, where {} puts it", reader->path(), name, file_name,
                                   index_path));
    tensors[name] = {reader, entry};
  }
  return tensors;
}

// The model's buffers that its family's folders may store (ModelSpec::hf_buffer) and `tensors`
// holds, read whole: taken out of `tensors`, which then holds the parameters' tensors alone.
TensorMap stored_buffers(WeightTensors& tensors, const model::CausalLM& model, const Quantization& quantization) {
  const auto& spec = model::model_spec(model.config().family);
  TensorMap buffers;
  if (!spec.hf_buffer) return buffers;
  for (const auto& item : model.named_buffers()) {
    const auto name = spec.to_hf_name(item.key());
    const auto it = tensors.find(name);
    if (!spec.hf_buffer(item.key()) || it == tensors.end()) continue;
    if (it->second.shape != item.value().sizes().vec())
      throw InputError(fmt::format("{}: tensor '{}' has shape [{}], the model expects [{}]", it->second.path, name,
                                   fmt::join(it->second.shape, ", "), fmt::join(item.value().sizes(), ", ")));
    check_floating(name, it->second, quantization);
    buffers[item.key()] = it->second.read(0, item.value().numel()).view(item.value().sizes());
    tensors.erase(it);
  }
  return buffers;
}

// config.json's quantization_config, where the folder has a config.json (a Hugging Face folder).
Quantization quantization_of(const std::string& dir) {
  const std::string path = dir + "/config.json";
  if (!std::filesystem::is_regular_file(path)) return {};
  return folder_quantization(read_hf_config(dir), path);
}

// hf: the tensors under the family's Hugging Face names (experts stored apart), dequantized as
// config.json's quantization_config says; else the model's own names, whole (a training
// checkpoint of one process).
FolderWeights safetensors_weights(const LocatedTensors& located, const std::string& description,
                                  const model::CausalLM& model, const Quantization& quantization, bool hf = true) {
  auto tensors = weight_tensors(located, quantization);
  auto buffers = stored_buffers(tensors, model, quantization);
  const auto& spec = model::model_spec(model.config().family);
  if (spec.hf_unused)
    for (auto it = tensors.begin(); it != tensors.end();)
      it = spec.hf_unused(model.config(), it->first) ? tensors.erase(it) : std::next(it);
  std::map<std::string, std::pair<std::vector<int64_t>, std::string>> found;
  for (const auto& [name, tensor] : tensors) found[name] = {tensor.shape, tensor.path};
  const auto expected = expected_tensors(model, hf);
  check_tensors(found, expected, description);
  for (const auto& [name, tensor] : tensors) check_floating(name, tensor, quantization);
  // Each parameter's stored tensors, in the order of its flattening.
  auto parts = std::make_shared<std::map<std::string, std::vector<WeightTensor>>>();
  for (const auto& item : model.named_parameters())
    if (!hf)
      (*parts)[item.key()].push_back(tensors.at(item.key()));
    else
      for (const auto& stored : model::hf_stored_tensors(spec, item.key(), item.value().sizes().vec()))
        (*parts)[item.key()].push_back(tensors.at(stored.first));
  FolderWeights weights;
  weights.tensors = static_cast<int64_t>(found.size());
  weights.description = description;
  for (const auto& [name, tensor] : tensors) weights.dequantized += tensor.dequantized ? 1 : 0;
  if (weights.dequantized > 0) weights.quantization = quantization.method == Quantization::Method::fp8 ? "fp8" : "mxfp4";
  weights.buffers = std::move(buffers);
  weights.source = [parts](const std::string& name, int64_t begin, int64_t count) {
    std::vector<torch::Tensor> pieces;
    int64_t offset = 0;
    for (const auto& part : parts->at(name)) {
      const int64_t numel =
          std::accumulate(part.shape.begin(), part.shape.end(), int64_t{1}, std::multiplies<>());
      const int64_t first = std::max(begin, offset), last = std::min(begin + count, offset + numel);
      if (first < last) pieces.push_back(part.read(first - offset, last - first));
      offset += numel;
    }
    return pieces.size() == 1 ? pieces.front() : pieces.empty() ? torch::empty({0}) : torch::cat(pieces);
  };
  return weights;
}

}  // namespace

std::map<std::string, std::string> read_weight_map(const std::string& index_path) {
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(util::read_file(index_path));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: invalid JSON: {}", index_path, e.what()));
  }
  if (!index.contains("weight_map") || !index.at("weight_map").is_object())
    throw InputError(fmt::format("{}: no \"weight_map\" object (tensor name -> file)", index_path));
  std::map<std::string, std::string> weight_map;
  for (const auto& [name, file] : index.at("weight_map").items()) {
    const std::string file_name = file.is_string() ? file.get<std::string>() : "";
    if (file_name.empty() || file_name.find('/') != std::string::npos || file_name == "." || file_name == "..")
      throw InputError(
          fmt::format("{}: tensor '{}' maps to {}, not a file name in the folder", index_path, name, file.dump()));
    weight_map[name] = file_name;
  }
  return weight_map;
}

FolderWeights folder_weights(const std::string& dir, const model::CausalLM& model) {
  const std::string weights_path = dir + "/model.safetensors";
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (!std::filesystem::exists(weights_path) && std::filesystem::exists(dir + "/" + shard_file_name(0))) {
    // A sharded training checkpoint: pieces of the flattened parameters, under HF names.
    auto checkpoint = std::make_shared<CheckpointReader>(dir);
    std::map<std::string, std::pair<std::vector<int64_t>, std::string>> found;
    const auto& spec = model::model_spec(model.config().family);
    for (const auto& name : checkpoint->names())
      if (!spec.hf_unused || !spec.hf_unused(model.config(), name)) found[name] = {checkpoint->shape(name), dir};
    check_tensors(found, expected_tensors(model, /*hf=*/false), dir);
    return {[checkpoint](const std::string& name, int64_t begin, int64_t count) {
              return checkpoint->read("model", name, begin, count);
            },
            static_cast<int64_t>(found.size()), dir, {}, 0, {}};
  }
  if (!std::filesystem::exists(weights_path) && std::filesystem::exists(index_path))
    return safetensors_weights(indexed_tensors(dir, index_path), index_path, model, quantization_of(dir));
  // A training checkpoint of one process holds the model's tensors under its own names.
  const bool checkpoint = std::filesystem::exists(dir + "/trainer_state.json");
  return safetensors_weights(file_tensors(weights_path), weights_path, model,
                             checkpoint ? Quantization{} : quantization_of(dir), /*hf=*/!checkpoint);
}

void load_buffers(model::CausalLM& model, const TensorMap& buffers) {
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_buffers())
    if (const auto it = buffers.find(item.key()); it != buffers.end()) item.value().copy_(it->second);
}

}  // namespace xtrain::ckpt

#include "ckpt/hf_llama.h"

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <map>
#include <stdexcept>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ckpt/checkpoint_reader.h"
#include "ckpt/sharded_checkpoint.h"
#include "util/durable_file.h"
#include "util/input_error.h"

namespace xtrain::ckpt {

TensorMap model_tensors(model::LlamaForCausalLM& model) {
  TensorMap tensors;
  for (const auto& item : model->named_parameters()) tensors[item.key()] = item.value();
  return tensors;
}

void load_model_tensors(model::LlamaForCausalLM& model, const TensorMap& tensors, const std::string& source) {
  torch::NoGradGuard no_grad;
  auto parameters = model->named_parameters();
  for (const auto& item : parameters) {
    auto it = tensors.find(item.key());
    if (it == tensors.end()) throw InputError(fmt::format("{}: missing tensor '{}'", source, item.key()));
    if (it->second.sizes() != item.value().sizes())
      throw InputError(fmt::format("{}: tensor '{}' has shape [{}], the model expects [{}]", source, item.key(),
                                   fmt::join(it->second.sizes(), ", "), fmt::join(item.value().sizes(), ", ")));
    item.value().copy_(it->second);
  }
  for (const auto& entry : tensors)
    if (!parameters.contains(entry.first))
      throw InputError(fmt::format("{}: unexpected tensor '{}' (does config.json match the weights?)", source, entry.first));
}

void save_hf_folder(const std::string& dir, model::LlamaForCausalLM& model, int64_t eos_token_id) {
  std::filesystem::create_directories(dir);
  save_safetensors(dir + "/model.safetensors", model_tensors(model), {{"format", "pt"}});
  util::write_file_durable(dir + "/config.json", hf_config(model->config(), eos_token_id).dump(2) + "\n");
}

model::LlamaForCausalLM load_hf_folder(const std::string& dir) {
  model::LlamaForCausalLM model(llama_config_from_hf(read_hf_config(dir), dir + "/config.json"));
  load_hf_weights(model, dir);
  return model;
}

int64_t load_hf_weights(model::LlamaForCausalLM& model, const std::string& dir) {
  const std::string weights_path = dir + "/model.safetensors";
  const std::string index_path = dir + "/model.safetensors.index.json";
  TensorMap tensors;
  std::string source = weights_path;
  if (!std::filesystem::exists(weights_path) && std::filesystem::exists(dir + "/" + shard_file_name(0))) {
    // A sharded training checkpoint: the same tensors, assembled from the shards.
    CheckpointReader checkpoint(dir);
    for (const auto& name : checkpoint.names()) tensors[name] = checkpoint.read_full("model", name);
    source = dir;
  } else if (!std::filesystem::exists(weights_path) && std::filesystem::exists(index_path)) {
    tensors = read_indexed_shards(dir, index_path);
    source = index_path;
  } else {
    tensors = load_safetensors(weights_path).tensors;
  }
  load_model_tensors(model, tensors, source);
  return static_cast<int64_t>(tensors.size());
}

TensorMap read_indexed_shards(const std::string& dir, const std::string& index_path) {
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(util::read_file(index_path));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: invalid JSON: {}", index_path, e.what()));
  }
  if (!index.contains("weight_map") || !index.at("weight_map").is_object())
    throw InputError(fmt::format("{}: no \"weight_map\" object (tensor name -> file)", index_path));
  std::map<std::string, std::vector<std::string>> by_file;
  for (const auto& [name, file] : index.at("weight_map").items()) {
    const std::string file_name = file.is_string() ? file.get<std::string>() : "";
    if (file_name.empty() || file_name.find('/') != std::string::npos || file_name == "." || file_name == "..")
      throw InputError(
          fmt::format("{}: tensor '{}' maps to {}, not a file name in the folder", index_path, name, file.dump()));
    by_file[file_name].push_back(name);
  }
  TensorMap tensors;
  for (const auto& [file_name, names] : by_file) {
    auto shard = load_safetensors(dir + "/" + file_name).tensors;
    for (const auto& name : names) {
      auto it = shard.find(name);
      if (it == shard.end())
        throw InputError(fmt::format("{}: tensor '{}' is not in {}, where {} puts it", dir + "/" + file_name, name,
                                     file_name, index_path));
      tensors[name] = it->second;
    }
  }
  return tensors;
}

}  // namespace xtrain::ckpt

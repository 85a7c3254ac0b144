#include "ckpt/hf_folder.h"

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <map>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "ckpt/folder_weights.h"
#include "model/layers/lora.h"
#include "model/model_builder.h"
#include "model/spec/model_spec.h"
#include "model/layers/parameter_source.h"
#include "util/durable_file.h"
#include "util/input_error.h"

namespace xtrain::ckpt {

TensorMap model_tensors(model::CausalLM& model) {
  TensorMap tensors;
  for (const auto& item : model.named_parameters()) tensors[item.key()] = item.value();
  return tensors;
}

TensorMap hf_tensors(const TensorMap& tensors, const std::string& family) {
  const auto& spec = model::model_spec(family);
  TensorMap stored;
  for (const auto& [name, tensor] : tensors) {
    const auto parts = model::hf_stored_tensors(spec, name, tensor.sizes().vec());
    const auto rows = tensor.detach().reshape({static_cast<int64_t>(parts.size()), -1});
    for (size_t i = 0; i < parts.size(); ++i)
      stored[parts[i].first] =
          parts.size() == 1 ? tensor.reshape(parts[i].second) : rows[static_cast<int64_t>(i)].view(parts[i].second);
  }
  return stored;
}

TensorMap hf_buffers(model::CausalLM& model) {
  const auto& spec = model::model_spec(model.config().family);
  TensorMap buffers;
  if (!spec.hf_buffer) return buffers;
  for (const auto& item : model.named_buffers())
    if (spec.hf_buffer(item.key())) buffers[spec.to_hf_name(item.key())] = item.value();
  return buffers;
}

void save_hf_folder(const std::string& dir, model::CausalLM& model, int64_t eos_token_id) {
  std::filesystem::create_directories(dir);
  const auto parameters = model_tensors(model);
  auto tensors = hf_tensors(parameters, model.config().family);
  tensors.merge(hf_buffers(model));
  const auto& spec = model::model_spec(model.config().family);
  if (spec.hf_copies)
    for (const auto& [name, source] : spec.hf_copies(model.config())) tensors[name] = parameters.at(source);
  save_safetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}});
  util::write_file_durable(dir + "/config.json", hf_config(model.config(), eos_token_id).dump(2) + "\n");
}

std::shared_ptr<model::CausalLM> load_hf_folder(const std::string& dir) {
  auto config = model_config_from_hf(read_hf_config(dir), dir + "/config.json");
  config.mtp_layers = 0;  // evaluation and generation read the next token alone
  auto model = model::declare_model(config);
  // A LoRA run's checkpoint holds the adapters beside the base (an export merges them).
  if (const auto lora = model::lora_from_config(read_hf_config(dir), dir + "/config.json"))
    model::add_lora_adapters(*model, *lora, model->adapter_dropout_key());
  load_hf_weights(*model, dir);  // whole, on the CPU
  return model;
}

namespace {
// A training checkpoint keeps the expert bias in trainer_state.json (train/expert_balance.h), by
// buffer name; a model whose layers it does not name (no prediction depths) skips them.
void load_checkpoint_buffers(model::CausalLM& model, const std::string& dir) {
  const std::string path = dir + "/trainer_state.json";
  if (!std::filesystem::exists(path)) return;
  nlohmann::json state;
  try {
    state = nlohmann::json::parse(util::read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: invalid JSON: {}", path, e.what()));
  }
  if (!state.contains("expert_bias")) return;
  TensorMap buffers;
  for (const auto& [name, values] : state.at("expert_bias").items())
    buffers[name] = torch::tensor(values.get<std::vector<float>>(), torch::kFloat32);
  load_buffers(model, buffers);
}
}  // namespace

int64_t load_hf_weights(model::CausalLM& model, const std::string& dir) {
  const auto weights = folder_weights(dir, model);
  model::materialize(model, weights.source);
  load_buffers(model, weights.buffers);
  load_checkpoint_buffers(model, dir);
  return weights.tensors;
}

}  // namespace xtrain::ckpt

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

namespace {
// Each family's Hugging Face class and model_type.
struct HfFamily {
  const char* family;
  const char* architecture;
};
constexpr HfFamily kHfFamilies[] = {
    {"llama", "LlamaForCausalLM"}, {"qwen2", "Qwen2ForCausalLM"}, {"qwen3", "Qwen3ForCausalLM"}};

const char* hf_architecture(const std::string& family) {
  for (const auto& f : kHfFamilies)
    if (family == f.family) return f.architecture;
  throw std::invalid_argument("no Hugging Face class for model family " + family);
}
}  // namespace

nlohmann::json hf_config(const model::LlamaConfig& c, int64_t eos_token_id) {
  nlohmann::json json = {
      {"architectures", {hf_architecture(c.family)}},
      {"model_type", c.family},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_heads},
      {"num_key_value_heads", c.num_kv_heads},
      {"head_dim", c.head_dim()},
      {"max_position_embeddings", c.max_seq_len},
      {"rope_theta", c.rope_theta},
      {"rope_scaling", nullptr},
      {"rms_norm_eps", c.norm_eps},
      {"tie_word_embeddings", c.tie_embeddings},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"mlp_bias", false},
      {"initializer_range", c.init_std},
      {"bos_token_id", eos_token_id},
      {"eos_token_id", eos_token_id},
      {"torch_dtype", "float32"},
      {"use_cache", true},
  };
  // qwen2's q, k and v biases are implied by its class; its sliding window is off.
  if (c.family == "qwen2") {
    json.erase("attention_bias");
    json.erase("mlp_bias");
    json["use_sliding_window"] = false;
  }
  return json;
}

model::LlamaConfig llama_config_from_hf(const nlohmann::json& json, const std::string& source) {
  auto field = [&](const char* name) -> const nlohmann::json& {
    if (!json.contains(name)) throw InputError(fmt::format("{}: missing field \"{}\"", source, name));
    return json.at(name);
  };
  auto integer = [&](const char* name) {
    const auto& value = field(name);
    if (!value.is_number_integer()) throw InputError(fmt::format("{}: field \"{}\" must be an integer", source, name));
    return value.get<int64_t>();
  };
  auto number = [&](const char* name, double fallback) {
    if (!json.contains(name)) return fallback;
    const auto& value = json.at(name);
    if (!value.is_number()) throw InputError(fmt::format("{}: field \"{}\" must be a number", source, name));
    return value.get<double>();
  };
  model::LlamaConfig c;
  c.family = json.value("model_type", std::string("llama"));
  if (!std::any_of(std::begin(kHfFamilies), std::end(kHfFamilies),
                   [&](const HfFamily& f) { return c.family == f.family; }))
    throw InputError(fmt::format("{}: model_type \"{}\" is not a family xtrain trains (llama, qwen2, qwen3)", source,
                                 c.family));
  c.vocab_size = integer("vocab_size");
  c.hidden_size = integer("hidden_size");
  c.intermediate_size = integer("intermediate_size");
  c.num_layers = integer("num_hidden_layers");
  c.num_heads = integer("num_attention_heads");
  c.num_kv_heads = json.contains("num_key_value_heads") ? integer("num_key_value_heads") : c.num_heads;
  c.max_seq_len = integer("max_position_embeddings");
  c.rope_theta = number("rope_theta", 10000.0);
  c.norm_eps = number("rms_norm_eps", 1e-6);
  c.init_std = number("initializer_range", 0.02);
  c.tie_embeddings = json.value("tie_word_embeddings", false);
  if (json.contains("head_dim") && !json.at("head_dim").is_null()) c.head_dim_override = integer("head_dim");
  if (c.num_heads <= 0 || c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0 ||
      (c.head_dim_override <= 0 && c.hidden_size % c.num_heads != 0))
    throw InputError(fmt::format("{}: inconsistent head counts (hidden_size {}, heads {}, kv heads {})",
                                 source, c.hidden_size, c.num_heads, c.num_kv_heads));
  if (c.head_dim_override == c.hidden_size / c.num_heads) c.head_dim_override = 0;
  if (c.family == "qwen2" && json.value("use_sliding_window", false))
    throw InputError(fmt::format("{}: use_sliding_window is true; xtrain's qwen2 attends to the whole sequence", source));
  return c;
}

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
  const std::string config_path = dir + "/config.json";
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(util::read_file(config_path));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: invalid JSON: {}", config_path, e.what()));
  }
  model::LlamaForCausalLM model(llama_config_from_hf(json, config_path));
  const std::string weights_path = dir + "/model.safetensors";
  if (!std::filesystem::exists(weights_path) && std::filesystem::exists(dir + "/" + shard_file_name(0))) {
    // A sharded training checkpoint: the same tensors, assembled from the shards.
    CheckpointReader checkpoint(dir);
    TensorMap tensors;
    for (const auto& name : checkpoint.names()) tensors[name] = checkpoint.read_full("model", name);
    load_model_tensors(model, tensors, dir);
    return model;
  }
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (!std::filesystem::exists(weights_path) && std::filesystem::exists(index_path)) {
    load_model_tensors(model, read_indexed_shards(dir, index_path), index_path);
    return model;
  }
  load_model_tensors(model, load_safetensors(weights_path).tensors, weights_path);
  return model;
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

#include "ckpt/hf_config.h"

#include <filesystem>

#include <fmt/format.h>

#include "model/model_spec.h"
#include "util/durable_file.h"
#include "util/input_error.h"

namespace xtrain::ckpt {

nlohmann::json hf_config(const model::ModelConfig& config, int64_t eos_token_id) {
  return model::model_spec(config.family).to_hf_config(config, eos_token_id);
}

model::ModelConfig model_config_from_hf(const nlohmann::json& config, const std::string& source) {
  if (!config.is_object()) throw InputError(fmt::format("{}: not a JSON object", source));
  return model::model_spec_for_hf(config, source).from_hf_config(config, source);
}

nlohmann::json read_hf_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  if (!std::filesystem::is_regular_file(path))
    throw InputError(fmt::format("{}: not found; a Hugging Face model folder holds config.json and "
                                 "model.safetensors (or model.safetensors.index.json and its files)",
                                 path));
  try {
    return nlohmann::json::parse(util::read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: invalid JSON: {}", path, e.what()));
  }
}

nlohmann::json hf_generation_config(int64_t eos_token_id) {
  return {{"_from_model_config", true}, {"bos_token_id", eos_token_id}, {"eos_token_id", eos_token_id}};
}

}  // namespace xtrain::ckpt

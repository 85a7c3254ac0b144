// Hugging Face config.json <-> ModelConfig, through the family's ModelSpec (model/model_spec.h).
// Torch-free, so that the recipe loader can take a model's shape from a folder (model.init_from).
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "model/model_config.h"

namespace xtrain::ckpt {

// config.json of a model whose documents end with eos_token_id.
nlohmann::json hf_config(const model::ModelConfig& config, int64_t eos_token_id);
// The shape in a config.json, read by the spec of its model_type; an InputError naming source and
// the field when a field is missing or mistyped, or names a feature the family does not compute.
model::ModelConfig model_config_from_hf(const nlohmann::json& config, const std::string& source);
// DIR/config.json, parsed; InputError when it is missing or not JSON.
nlohmann::json read_hf_config(const std::string& dir);
// generation_config.json for a model whose documents end with eos_token_id.
nlohmann::json hf_generation_config(int64_t eos_token_id);

}  // namespace xtrain::ckpt

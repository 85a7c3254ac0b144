// Hugging Face config.json <-> LlamaConfig for the llama, qwen2 and qwen3 families. Torch-free,
// so that the recipe loader can take a model's shape from a folder (model.init_from).
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "model/llama_config.h"

namespace xtrain::ckpt {

nlohmann::json hf_config(const model::LlamaConfig& config, int64_t eos_token_id);
// Reads HF fields; a missing or mistyped field, or a feature xtrain's layers do not compute
// (a rope type other than default and llama3, biases the family lacks, another activation,
// sliding-window layers), is an InputError naming source and field: a model that loaded but
// computed something else would be worse. The rotary base and scaling come from
// rope_parameters (transformers 5) or rope_theta and rope_scaling (4.x).
model::LlamaConfig llama_config_from_hf(const nlohmann::json& config, const std::string& source);
// DIR/config.json, parsed; InputError when it is missing or not JSON.
nlohmann::json read_hf_config(const std::string& dir);
// generation_config.json for a model whose documents end with eos_token_id.
nlohmann::json hf_generation_config(int64_t eos_token_id);

}  // namespace xtrain::ckpt

// Hugging Face adapter for the llama, qwen2 and qwen3 families: config.json <-> LlamaConfig, and model.safetensors <-> the
// model's parameters. xtrain's parameter names already are HF's (see model/llama.h) and its
// rotary layout is HF's rotate_half layout, so tensors map 1:1 with no permutation.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "ckpt/safetensors.h"
#include "model/llama.h"

namespace xtrain::ckpt {

nlohmann::json hf_config(const model::LlamaConfig& config, int64_t eos_token_id);
// Reads HF fields; a missing or mistyped field is an InputError naming source and field.
model::LlamaConfig llama_config_from_hf(const nlohmann::json& config, const std::string& source);

// The parameters under their HF names (shared storage, not copies).
TensorMap model_tensors(model::LlamaForCausalLM& model);
// Copies tensors into the model. Strict: a missing, unexpected or mis-shaped tensor is an
// InputError naming it and the source file.
void load_model_tensors(model::LlamaForCausalLM& model, const TensorMap& tensors, const std::string& source);

// A folder with config.json + model.safetensors, as HF's save_pretrained writes it.
void save_hf_folder(const std::string& dir, model::LlamaForCausalLM& model, int64_t eos_token_id);
// Loads such a folder, one whose weights save_pretrained split over several files
// (model.safetensors.index.json), or a sharded training checkpoint (config.json +
// shard-*.safetensors).
model::LlamaForCausalLM load_hf_folder(const std::string& dir);
// The tensors of a model.safetensors.index.json's files, by its weight_map; a file name that
// leaves the folder, or a tensor missing from its file, is an InputError.
TensorMap read_indexed_shards(const std::string& dir, const std::string& index_path);

}  // namespace xtrain::ckpt

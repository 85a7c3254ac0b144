// Hugging Face adapter for the llama, qwen2 and qwen3 families: model.safetensors <-> the
// model's parameters (config.json is ckpt/hf_config.h). xtrain's parameter names already are
// HF's (see model/llama.h) and its rotary layout is HF's rotate_half layout, so tensors map 1:1
// with no permutation.
#pragma once
#include <string>

#include "ckpt/hf_config.h"
#include "ckpt/safetensors.h"
#include "model/llama.h"

namespace xtrain::ckpt {

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
// The weights of such a folder into a model already built to its config.json (strict, as
// load_model_tensors). Returns the number of tensors read.
int64_t load_hf_weights(model::LlamaForCausalLM& model, const std::string& dir);
// The tensors of a model.safetensors.index.json's files, by its weight_map; a file name that
// leaves the folder, or a tensor missing from its file, is an InputError.
TensorMap read_indexed_shards(const std::string& dir, const std::string& index_path);

}  // namespace xtrain::ckpt

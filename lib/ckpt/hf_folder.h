// Hugging Face folders of any registered family: model.safetensors (or its shards) <-> the
// model's parameters, under the tensor names of the family's spec (config.json is
// model/spec/hf_config.h).
#pragma once
#include <memory>
#include <string>

#include "model/spec/hf_config.h"
#include "ckpt/safetensors.h"
#include "model/causal_lm.h"

namespace xtrain::ckpt {

// The parameters under their HF names (shared storage, not copies).
TensorMap model_tensors(model::CausalLM& model);
// The tensors of a Hugging Face folder for these (model-named) tensors of a `family` model:
// renamed, and experts stored apart, as transformers stores them (model::hf_stored_tensors).
TensorMap hf_tensors(const TensorMap& tensors, const std::string& family);
// The buffers its family's folders store (ModelSpec::hf_buffer), under their HF names.
TensorMap hf_buffers(model::CausalLM& model);

// A folder with config.json + model.safetensors, as HF's save_pretrained writes it.
void save_hf_folder(const std::string& dir, model::CausalLM& model, int64_t eos_token_id);
// Loads such a folder, one whose weights save_pretrained split over several files
// (model.safetensors.index.json), or a sharded training checkpoint (config.json +
// shard-*.safetensors), as a model without multi-token prediction (which evaluation and
// generation do not use; the folder's prediction layers are not read).
std::shared_ptr<model::CausalLM> load_hf_folder(const std::string& dir);
// The weights of such a folder into a model built to its config.json and not yet materialised
// (strict, as ckpt/folder_weights.h checks). Returns the number of tensors read.
int64_t load_hf_weights(model::CausalLM& model, const std::string& dir);

}  // namespace xtrain::ckpt

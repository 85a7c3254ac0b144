// The weights of a model folder as a ParameterSource (model/layers/parameter_source.h) that reads only
// the slices asked for: a Hugging Face folder (model.safetensors, or the files of
// model.safetensors.index.json) or a sharded training checkpoint (shard-*.safetensors). Under
// FSDP each rank thus reads its own shards of the folder and nothing else.
//
// The folder must hold exactly the model's tensors, under its family's Hugging Face names (each
// expert's projections apart, as transformers stores them; model/spec/model_spec.h) or, for a
// checkpoint, the model's own names, with their shapes: checked from the headers alone, before any data is read. A missing, unexpected or
// mis-shaped tensor is an InputError naming it and the file; so is an integer tensor where a
// parameter is floating point. A Hugging Face folder quantized as its config.json's
// quantization_config says (fp8 block scales, mxfp4 experts) is read dequantized, as
// transformers dequantizes it (ckpt/quantized_weights.h).
#pragma once
#include <map>
#include <string>

#include "ckpt/safetensors.h"
#include "model/causal_lm.h"
#include "model/layers/parameter_source.h"

namespace xtrain::ckpt {

struct FolderWeights {
  model::ParameterSource source;  // values as fp32, whatever the file's float dtype, dequantized
  int64_t tensors = 0;
  std::string description;  // the file(s) read, for messages
  // Buffers a Hugging Face folder stores (ModelSpec::hf_buffer: DeepSeek-V3's expert bias), by
  // the model's buffer names, whole, fp32; those the folder lacks keep their initial values.
  TensorMap buffers;
  // Of `tensors`, those read dequantized, and their quantization ("fp8", "mxfp4"); 0 and empty
  // for a folder of float tensors.
  int64_t dequantized = 0;
  std::string quantization;
};

FolderWeights folder_weights(const std::string& dir, const model::CausalLM& model);

// Copies `buffers` (FolderWeights::buffers) into the model's buffers of those names.
void load_buffers(model::CausalLM& model, const TensorMap& buffers);

// model.safetensors.index.json's weight_map: tensor name -> file name in the folder. A file name
// that leaves the folder is an InputError; so is a tensor missing from its file (folder_weights).
std::map<std::string, std::string> read_weight_map(const std::string& index_path);

}  // namespace xtrain::ckpt

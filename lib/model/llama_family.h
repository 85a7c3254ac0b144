// The specs of the families that share the Llama decoder (model/llama.h): llama, qwen2 (biases
// on q, k and v) and qwen3 (RMSNorm on q and k per head, head_dim set apart from
// hidden_size / num_heads). Their tensor names are Hugging Face's already, and the rotary
// layout is HF's rotate_half layout, so tensors map 1:1 with no permutation.
#pragma once
#include "model/model_spec.h"

namespace xtrain::model {

ModelSpec llama_spec();
ModelSpec qwen2_spec();
ModelSpec qwen3_spec();

}  // namespace xtrain::model

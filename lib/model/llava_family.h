// The spec of the llava family (model/llava.h): transformers' LlavaForConditionalGeneration with a
// CLIP vision tower (vision_config model_type clip_vision_model) and a Llama language model
// (text_config model_type llama). Its tensor names are those transformers' save_pretrained
// writes; the names of transformers' modules in memory and of older checkpoints
// (vision_tower.vision_model.*) map onto them through from_hf_name.
#pragma once
#include <memory>

#include "model/model_spec.h"

namespace xtrain::model {

ModelSpec llava_spec();

// The model (model/llava.h), built without parameter storage. Defined with the model, so that
// the spec itself needs no LibTorch.
std::shared_ptr<CausalLM> build_llava(const ModelConfig& config);

}  // namespace xtrain::model

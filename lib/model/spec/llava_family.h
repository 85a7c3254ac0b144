// The spec of the llava family (model/llava/llava.h): transformers' LlavaForConditionalGeneration with a
// CLIP vision tower (vision_config model_type clip_vision_model) and a Llama language model
// (text_config model_type llama). Its tensor names are those transformers' save_pretrained
// writes; the names of transformers' modules in memory and of older checkpoints
// (vision_tower.vision_model.*) map onto them through from_hf_name.
#pragma once

#include "model/spec/model_spec.h"

namespace xtrain::model {

ModelSpec llava_spec();

}  // namespace xtrain::model

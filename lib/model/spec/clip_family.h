// The spec of the clip family (model/clip/clip.h): transformers' CLIPModel, its config.json
// (text_config, vision_config, projection_dim, logit_scale_init_value) and its tensor names,
// which are xtrain's own. ModelConfig's own fields are the text tower's (vocab_size,
// max_seq_len = max_position_embeddings, ...), vision the image tower's, vision.projection_dim
// the shared space's width, contrastive the end-of-text id and logit_scale's initial value.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "model/spec/model_spec.h"

namespace xtrain::model {

ModelSpec clip_spec();

// transformers' CLIPVisionConfig of a vision tower (clip's vision_config, and llava's).
nlohmann::json clip_vision_config_json(const VisionConfig& v);

}  // namespace xtrain::model

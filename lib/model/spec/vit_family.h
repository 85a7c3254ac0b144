// The spec of the vit family (model/vit/vit.h): transformers' ViTForImageClassification, its
// config.json and its tensor names, which are xtrain's own. The shape maps onto ModelConfig as:
// vocab_size = num_labels (the classifier's rows: xtrain's output head), max_seq_len = the
// tokens the encoder sees (patches + the class token), and vision.image_size, patch_size and
// num_channels the image's (vision.num_layers stays 0: there is no separate tower).
#pragma once

#include "model/spec/model_spec.h"

namespace xtrain::model {

ModelSpec vit_spec();

}  // namespace xtrain::model

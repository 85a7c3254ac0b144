// The spec of the t5 family (model/t5/t5.h): transformers' T5ForConditionalGeneration in its
// two styles, v1.0 (ReLU feed-forward, tied, decoder states scaled by d_model^-0.5) and v1.1
// (gated GELU, untied, unscaled); its config.json and its tensor names, which are xtrain's own.
#pragma once

#include "model/spec/model_spec.h"

namespace xtrain::model {

ModelSpec t5_spec();

}  // namespace xtrain::model

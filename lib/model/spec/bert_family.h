// The spec of the bert family (model/bert/bert.h): transformers' BertForMaskedLM, its config.json and
// its tensor names, which are xtrain's own.
#pragma once

#include "model/spec/model_spec.h"

namespace xtrain::model {

ModelSpec bert_spec();

}  // namespace xtrain::model

// The spec of the bert family (model/bert.h): transformers' BertForMaskedLM, its config.json and
// its tensor names, which are xtrain's own.
#pragma once
#include <memory>

#include "model/model_spec.h"

namespace xtrain::model {

ModelSpec bert_spec();

// The model (model/bert.h), built without parameter storage. Defined with the model, so that
// the spec itself needs no LibTorch.
std::shared_ptr<CausalLM> build_bert(const ModelConfig& config);

}  // namespace xtrain::model

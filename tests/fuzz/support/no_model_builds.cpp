// The fuzz targets parse recipes and config.json files with the model registry, and never build
// a model: the registry's build functions link against this instead of LibTorch.
#include <stdexcept>

#include "model/bert_family.h"
#include "model/llama_family.h"
#include "model/llava_family.h"

namespace xtrain::model {

std::shared_ptr<CausalLM> build_llama_decoder(const ModelConfig&, const AttentionFeatures&) {
  throw std::logic_error("the fuzz targets build no models");
}

std::shared_ptr<CausalLM> build_bert(const ModelConfig&) { throw std::logic_error("the fuzz targets build no models"); }

std::shared_ptr<CausalLM> build_llava(const ModelConfig&) { throw std::logic_error("the fuzz targets build no models"); }

}  // namespace xtrain::model

#include "model/model_builder.h"

#include <stdexcept>

#include <fmt/format.h>

#include "model/bert/bert.h"
#include "model/clip/clip.h"
#include "model/llama.h"
#include "model/llava/llava.h"
#include "model/spec/model_spec.h"
#include "model/t5/t5.h"
#include "model/vit/vit.h"
#include "model/layers/parameter_source.h"

namespace xtrain::model {

std::shared_ptr<CausalLM> declare_model(const ModelConfig& config) {
  const auto& spec = model_spec(config.family);
  switch (spec.architecture) {
    case Architecture::llama_decoder:
      return std::make_shared<LlamaForCausalLM>(config, spec.attention);
    case Architecture::bert:
      return std::make_shared<BertForMaskedLM>(config);
    case Architecture::llava:
      return std::make_shared<LlavaForConditionalGeneration>(config);
    case Architecture::vit:
      return std::make_shared<VitForImageClassification>(config);
    case Architecture::t5:
      return std::make_shared<T5ForConditionalGeneration>(config);
    case Architecture::clip:
      return std::make_shared<ClipModel>(config);
  }
  throw std::logic_error(fmt::format("model.family {}: no case in model_builder.cpp for its architecture",
                                     config.family));
}

std::shared_ptr<CausalLM> build_model(const ModelConfig& config, uint64_t seed) {
  auto model = declare_model(config);
  materialize(*model, init_source(model->init_plan(), seed));
  return model;
}

}  // namespace xtrain::model

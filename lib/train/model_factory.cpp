#include "train/model_factory.h"

#include <torch/torch.h>

namespace xtrain::train {

model::LlamaConfig llama_config(const config::ModelSection& model) { return model; }

model::LlamaForCausalLM build_model(const config::Recipe& recipe) {
  torch::manual_seed(static_cast<uint64_t>(recipe.run.seed));
  return model::LlamaForCausalLM(llama_config(recipe.model));
}

}  // namespace xtrain::train

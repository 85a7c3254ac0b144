#include "train/model_factory.h"

#include <torch/torch.h>

#include "ckpt/hf_llama.h"

namespace xtrain::train {

model::LlamaConfig llama_config(const config::ModelSection& model) { return model; }

model::LlamaForCausalLM build_model(const config::Recipe& recipe) {
  torch::manual_seed(static_cast<uint64_t>(recipe.run.seed));
  return model::LlamaForCausalLM(llama_config(recipe.model));
}

int64_t import_initial_weights(model::LlamaForCausalLM& model, const std::string& init_from) {
  return ckpt::load_hf_weights(model, init_from.substr(3));  // "hf:" checked by the option
}

}  // namespace xtrain::train

#include "train/model_factory.h"

#include <torch/torch.h>

#include <fmt/format.h>

#include "ckpt/hf_llama.h"
#include "ckpt/manifest.h"
#include "util/input_error.h"

namespace xtrain::train {

model::LlamaConfig llama_config(const config::ModelSection& model) { return model; }

model::LlamaForCausalLM build_model(const config::Recipe& recipe) {
  torch::manual_seed(static_cast<uint64_t>(recipe.run.seed));
  return model::LlamaForCausalLM(llama_config(recipe.model));
}

int64_t import_initial_weights(model::LlamaForCausalLM& model, const std::string& init_from) {
  const std::string dir = init_from.substr(3);  // "hf:" checked by the option
  // A folder xtrain exported carries a manifest: damage is found before it is trained on.
  const auto check = ckpt::verify_manifest(dir);
  if (!check.usable()) throw InputError(fmt::format("model.init_from {}: {}", init_from, check.summary()));
  return ckpt::load_hf_weights(model, dir);
}

}  // namespace xtrain::train

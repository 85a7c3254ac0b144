// Builds the model a recipe describes.
#pragma once
#include "config/recipe.h"
#include "model/llama.h"

namespace xtrain::train {

model::LlamaConfig llama_config(const config::ModelSection& model);
// Seeds the default generator with run.seed first, so the init is reproducible.
model::LlamaForCausalLM build_model(const config::Recipe& recipe);
// model.init_from (hf:DIR) into a model built from the recipe, whose shape the recipe loader
// took from DIR/config.json; a folder with a manifest (an xtrain export) must verify. Returns
// the number of tensors read.
int64_t import_initial_weights(model::LlamaForCausalLM& model, const std::string& init_from);

}  // namespace xtrain::train

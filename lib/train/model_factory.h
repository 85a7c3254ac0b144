// Builds the model a recipe describes.
#pragma once
#include "config/recipe.h"
#include "model/llama.h"

namespace xtrain::train {

model::LlamaConfig llama_config(const config::ModelSection& model);
// Seeds the default generator with run.seed first, so the init is reproducible.
model::LlamaForCausalLM build_model(const config::Recipe& recipe);

}  // namespace xtrain::train

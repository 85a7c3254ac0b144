// The model a recipe describes, through the registry of families (model/spec/model_spec.h), and
// where its first weights come from: run.seed's init, or model.init_from's folder.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "config/recipe.h"
#include "model/causal_lm.h"
#include "model/layers/parameter_source.h"

namespace xtrain::train {

// The recipe's model, its parameters without storage (model/layers/parameter_source.h), with
// model.lora's adapters.
std::shared_ptr<model::CausalLM> build_model(const config::Recipe& recipe);

struct InitialWeights {
  model::ParameterSource source;
  std::string description;  // for the log: "run.seed 1234", or "hf:DIR (N tensors)"
  // The expert bias a Hugging Face folder stores (DeepSeek-V3's e_score_correction_bias), as
  // ExpertBalance::load_state takes it; empty when it stores none.
  nlohmann::json expert_bias;
};
// run.seed's init; or, with model.init_from (hf:DIR) and `fresh` (not resuming), the folder's
// weights, whose shape the recipe loader took from DIR/config.json (with model.lora, the base's
// weights, and the adapters' from run.seed's init). A folder with a manifest (an
// xtrain export) must verify; its tensors must be exactly the model's (checked before any read).
InitialWeights initial_weights(const config::Recipe& recipe, const model::CausalLM& model, bool fresh);

}  // namespace xtrain::train

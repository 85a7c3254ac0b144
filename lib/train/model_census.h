// The planner's census of a recipe's model (plan/model_census.h), counted from the model itself
// built without storage: each parameter by its name's place (embed_tokens, lm_head, a layer's
// self_attn, mlp, mlp.experts, the router), so that every family's own layers count exactly.
#pragma once
#include "config/recipe.h"
#include "plan/model_census.h"

namespace xtrain::train {

plan::ModelCensus model_census(const config::Recipe& recipe);

}  // namespace xtrain::train

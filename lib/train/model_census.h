// The planner's census of a recipe's model (plan/model_census.h), counted from the model itself
// built without storage: the layers are its shard plan's blocks (a vision tower's aside), as
// FSDP and the pipeline cut them, and each parameter counts by its name's place (the token table,
// lm_head, a layer's attention, MLP, experts, router), so that every family's own layers count
// exactly.
#pragma once
#include "config/recipe.h"
#include "plan/model_census.h"

namespace xtrain::train {

plan::ModelCensus model_census(const config::Recipe& recipe);

}  // namespace xtrain::train

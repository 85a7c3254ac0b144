// model.init_from hf:DIR: the model's shape from DIR/config.json and, unless the recipe names
// one, the tokenizer from DIR. Each value passes the check its recipe key declares in the option
// registry, as the recipe's own value would (a folder cannot bring a shape the recipe could not),
// and a key the recipe sets as well must agree; the values are copied through the registry's
// keys, so a model field is named by its key and the config.json field it comes from only.
#pragma once
#include "config/recipe.h"
#include "config/recipe_report.h"

namespace xtrain::config {

// Fills recipe.model from the folder of recipe.model.init_from (nothing when it is empty),
// reporting problems to report. False when config.json's shape was refused, so that nothing
// is derived from it or sized by it.
bool import_from_hf(Recipe& recipe, RecipeReport& report);

}  // namespace xtrain::config

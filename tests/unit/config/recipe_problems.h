// The diagnostics a recipe text produces, one line each ("r.yaml:3:5: key: message"); empty
// when it loads. Shared by the recipe tests.
#pragma once
#include <string>
#include <vector>

#include "config/recipe_loader.h"

namespace xtrain::testing {

inline std::vector<std::string> problems(const std::string& text, std::vector<std::string> overrides = {}) {
  config::LoadOptions options;
  options.overrides = std::move(overrides);
  try {
    config::load_recipe_text(text, "r.yaml", options);
  } catch (const config::RecipeError& e) {
    std::vector<std::string> lines;
    for (const auto& d : e.diagnostics()) lines.push_back(d.str());
    return lines;
  }
  return {};
}

}  // namespace xtrain::testing

// Loading a recipe: YAML file + `--set key.path=value` overrides -> a checked Recipe.
// Every problem is collected as a Diagnostic of the form
//   recipe.yaml:12:5: model.hiden_size: unknown key (did you mean model.hidden_size?)
//   --set train.steps=abc: train.steps: expected an integer, got 'abc'
// and load_recipe throws RecipeError holding all of them (an InputError: exit code 2). Each
// feature's own rules are in config/rules/ (config/recipe_rule.h), model.init_from's import in
// config/hf_import.h.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/recipe.h"
#include "config/recipe_report.h"

namespace xtrain::config {

struct LoadOptions {
  std::vector<std::string> overrides;  // "key.path=value", YAML-parsed values
  // Check that data files and the resume path exist (off when reading a checkpoint's copy).
  bool check_files = true;
};

// Larger files are refused before they are parsed.
constexpr uintmax_t kMaxRecipeBytes = 4'000'000;

Recipe load_recipe(const std::string& path, const LoadOptions& options = {});
Recipe load_recipe_text(const std::string& text, const std::string& display_name,
                        const LoadOptions& options = {});

// The fully resolved recipe as YAML (every key, defaults filled in), loadable again.
std::string dump_recipe(const Recipe& recipe);
// The recipe reference as a Markdown table, for docs/recipes.md.
std::string options_markdown();

}  // namespace xtrain::config

// A feature's recipe rules: after the keys are read and the derived values resolved, the loader
// hands the recipe to every rule of the table in config/rules/rules.cpp, and each refuses the
// keys of its own feature that do not fit (parallel.cp against data.seq_len, precision.fp8
// against train.dtype, ...), naming the key and the fix. A feature's rules live in a file of
// their own in config/rules/; adding one adds that file and its line in the table, and the
// loader stays as it is.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/recipe.h"
#include "config/recipe_report.h"

namespace xtrain::config {

struct RuleContext {
  const Recipe& recipe;  // resolved: defaults, model.init_from's shape and derived sizes filled in
  RecipeReport& report;
  int64_t tokenizer_vocab = 0;  // the ids of data.tokenizer; 0 when it could not be built

  // Refuses key where the recipe set it (its line, its --set, or the file for a default).
  void refuse(const std::string& key, std::string message) const { report.refuse(key, std::move(message)); }
};

using RecipeRule = void (*)(const RuleContext&);

struct FeatureRule {
  const char* feature;  // "context_parallel": the file in config/rules/ that holds it
  RecipeRule check;
};

// Every feature's rule, in the order their problems are listed.
const std::vector<FeatureRule>& recipe_rules();

// Runs every rule on context's recipe.
void apply_recipe_rules(const RuleContext& context);

}  // namespace xtrain::config

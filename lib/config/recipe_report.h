// What loading a recipe found: where each key was set and every problem, each a Diagnostic of
// the form
//   recipe.yaml:12:5: model.hiden_size: unknown key (did you mean model.hidden_size?)
//   --set train.steps=abc: train.steps: expected an integer, got 'abc'
// The loader, the model.init_from import and the feature rules (recipe_rule.h) report here, so
// a problem is placed the same way whoever finds it.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "util/input_error.h"

namespace xtrain::config {

struct Diagnostic {
  std::string where;  // "file:line:col" or "--set key=value"
  std::string key;    // dotted key path, may be empty for file-level problems
  std::string message;
  std::string str() const;
};

// Every problem of a recipe at once (an InputError: exit code 2).
class RecipeError : public InputError {
 public:
  explicit RecipeError(std::vector<Diagnostic> diagnostics);
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

 private:
  std::vector<Diagnostic> diagnostics_;
};

class RecipeReport {
 public:
  explicit RecipeReport(std::string file) : file_(std::move(file)) {}

  // The recipe's display name: the place of file-level problems and of defaulted keys.
  const std::string& file() const { return file_; }
  // Records where key was set: "file:line:col" or "--set key=value".
  void set_at(const std::string& key, std::string where) { set_at_[key] = std::move(where); }
  bool is_set(const std::string& key) const { return set_at_.count(key) != 0; }
  // Where key was set, or the file itself for a defaulted key.
  std::string where(const std::string& key) const;

  // A problem at a place of its own (a line of the file, a config.json).
  void add(std::string where, std::string key, std::string message) {
    diagnostics_.push_back({std::move(where), std::move(key), std::move(message)});
  }
  // A problem with key, placed where the recipe set it.
  void refuse(const std::string& key, std::string message) { add(where(key), key, std::move(message)); }

  bool empty() const { return diagnostics_.empty(); }
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

 private:
  std::string file_;
  std::map<std::string, std::string> set_at_;
  std::vector<Diagnostic> diagnostics_;
};

}  // namespace xtrain::config

#include "config/recipe_report.h"

#include <fmt/format.h>

namespace xtrain::config {

namespace {

std::string join_diagnostics(const std::vector<Diagnostic>& diagnostics) {
  std::string text;
  for (const auto& d : diagnostics) text += (text.empty() ? "" : "\n") + d.str();
  return text;
}

}  // namespace

std::string Diagnostic::str() const {
  return key.empty() ? fmt::format("{}: {}", where, message)
                     : fmt::format("{}: {}: {}", where, key, message);
}

RecipeError::RecipeError(std::vector<Diagnostic> diagnostics)
    : InputError(join_diagnostics(diagnostics)), diagnostics_(std::move(diagnostics)) {}

std::string RecipeReport::where(const std::string& key) const {
  auto it = set_at_.find(key);
  return it == set_at_.end() ? file_ : it->second;
}

}  // namespace xtrain::config

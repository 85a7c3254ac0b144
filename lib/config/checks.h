// Reusable value checks for option declarations.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "config/close_match.h"
#include "config/option_registry.h"

namespace xtrain::config::checks {

template <class T>
Check<T> at_least(T minimum) {
  return [minimum](const T& value) -> std::optional<std::string> {
    if (value < minimum) return fmt::format("must be >= {}, got {}", minimum, value);
    return std::nullopt;
  };
}

template <class T>
Check<T> in_range(T low, T high) {  // inclusive
  return [low, high](const T& value) -> std::optional<std::string> {
    if (value < low || value > high)
      return fmt::format("must be between {} and {}, got {}", low, high, value);
    return std::nullopt;
  };
}

inline Check<double> positive() {
  return [](const double& value) -> std::optional<std::string> {
    if (!(value > 0)) return fmt::format("must be > 0, got {}", value);
    return std::nullopt;
  };
}

// A parallel degree: a positive count, or -1 for "the ranks left over".
inline Check<int64_t> degree() {
  return [](const int64_t& value) -> std::optional<std::string> {
    if (value == -1 || value >= 1) return std::nullopt;
    return fmt::format("must be a positive number of ranks or -1 (the rest), got {}", value);
  };
}

inline Check<std::string> one_of(std::vector<std::string> choices) {
  return [choices](const std::string& value) -> std::optional<std::string> {
    for (const auto& choice : choices)
      if (value == choice) return std::nullopt;
    const auto meant = closest_choice(value, choices);
    return fmt::format("must be one of {}, got '{}'{}", fmt::join(choices, ", "), value,
                       meant ? fmt::format(" (did you mean {}?)", *meant) : "");
  };
}

inline Check<std::string> not_empty() {
  return [](const std::string& value) -> std::optional<std::string> {
    if (value.empty()) return std::string("must not be empty");
    return std::nullopt;
  };
}

}  // namespace xtrain::config::checks

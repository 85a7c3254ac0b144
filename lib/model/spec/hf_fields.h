// Reading a config.json's fields, each with an InputError naming the file and the field; a
// missing or null field takes the fallback given (transformers' class default). Integers are
// those of int64 (a bigger one is refused, not wrapped), numbers finite; whether a value is in
// the recipe's range is the recipe's check (config/hf_import.cpp), made after.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/input_error.h"

namespace xtrain::model {

// A reader that makes one entry per layer (gpt_oss's default layer_types) refuses more layers
// than this before it allocates them; the recipe's own range (model.num_layers) is far below.
inline constexpr int64_t kMaxHfListLayers = int64_t{1} << 20;

class HfFields {
 public:
  HfFields(const nlohmann::json& json, const std::string& source) : json_(json), source_(source) {}
  int64_t integer(const char* name) const {
    if (!json_.contains(name)) throw InputError(fmt::format("{}: missing field \"{}\"", source_, name));
    return integer_of(json_.at(name), source_, name);
  }
  int64_t integer(const char* name, int64_t fallback) const {
    return json_.contains(name) && !json_.at(name).is_null() ? integer(name) : fallback;
  }
  double number(const char* name, double fallback) const {
    if (!json_.contains(name) || json_.at(name).is_null()) return fallback;
    return number_of(json_.at(name), source_, name);
  }
  bool boolean(const char* name, bool fallback) const {
    if (!json_.contains(name) || json_.at(name).is_null()) return fallback;
    if (!json_.at(name).is_boolean()) throw InputError(fmt::format("{}: field \"{}\" must be true or false", source_, name));
    return json_.at(name).get<bool>();
  }
  std::string text(const char* name, const std::string& fallback) const {
    if (!json_.contains(name) || json_.at(name).is_null()) return fallback;
    if (!json_.at(name).is_string()) throw InputError(fmt::format("{}: field \"{}\" must be a string", source_, name));
    return json_.at(name).get<std::string>();
  }

  // A JSON value as an int64: an integer literal within int64's range.
  static int64_t integer_of(const nlohmann::json& value, const std::string& source, const std::string& name) {
    if (!value.is_number_integer())
      throw InputError(fmt::format("{}: field \"{}\" must be an integer, got {}", source, name, value.dump()));
    if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      throw InputError(fmt::format("{}: field \"{}\" is {}, beyond any size or id (2^63 - 1 at most)", source, name,
                                   value.dump()));
    return value.get<int64_t>();
  }
  // A JSON value as a finite double (JSON has no NaN, but 1e999 reads as infinity).
  static double number_of(const nlohmann::json& value, const std::string& source, const std::string& name) {
    if (!value.is_number() || !std::isfinite(value.get<double>()))
      throw InputError(fmt::format("{}: field \"{}\" must be a finite number, got {}", source, name, value.dump()));
    return value.get<double>();
  }

 private:
  const nlohmann::json& json_;
  const std::string& source_;
};

}  // namespace xtrain::model

// Reading a config.json's fields, each with an InputError naming the file and the field; a
// missing or null field takes the fallback given (transformers' class default).
#pragma once
#include <cstdint>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/input_error.h"

namespace xtrain::model {

class HfFields {
 public:
  HfFields(const nlohmann::json& json, const std::string& source) : json_(json), source_(source) {}
  int64_t integer(const char* name) const {
    if (!json_.contains(name) || !json_.at(name).is_number_integer())
      throw InputError(fmt::format("{}: field \"{}\" must be an integer", source_, name));
    return json_.at(name).get<int64_t>();
  }
  int64_t integer(const char* name, int64_t fallback) const {
    return json_.contains(name) && !json_.at(name).is_null() ? integer(name) : fallback;
  }
  double number(const char* name, double fallback) const {
    if (!json_.contains(name) || json_.at(name).is_null()) return fallback;
    if (!json_.at(name).is_number()) throw InputError(fmt::format("{}: field \"{}\" must be a number", source_, name));
    return json_.at(name).get<double>();
  }
  bool boolean(const char* name, bool fallback) const {
    if (!json_.contains(name) || json_.at(name).is_null()) return fallback;
    if (!json_.at(name).is_boolean()) throw InputError(fmt::format("{}: field \"{}\" must be true or false", source_, name));
    return json_.at(name).get<bool>();
  }

 private:
  const nlohmann::json& json_;
  const std::string& source_;
};

}  // namespace xtrain::model
